#include "train/trainer.h"

#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/loopback_communicator.h"
#include "model/attention.h"
#include "model/model_stats.h"
#include "pipeline/stage_partition.h"
#include "train/batch_tensors.h"
#include "train/engine_options.h"
#include "train/cuda_device.h"

namespace deepnet::train {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

// The shape fields a checkpoint must agree on to be resumed.
nlohmann::json ModelShape(const model::DeepNetConfig& c) {
  return {{"encoder_layers", c.encoder_layers()},
          {"decoder_layers", c.decoder_layers()},
          {"d_model", c.d_model()},
          {"heads", c.heads()},
          {"ffn_dim", c.ffn_dim()},
          {"vocab_size", c.vocab_size()},
          {"norm", std::string(model::ToString(c.norm()))},
          {"init", std::string(model::ToString(c.init()))},
          {"positions", std::string(model::ToString(c.positions()))},
          {"share_all_embeddings", c.share_all_embeddings()},
          {"share_decoder_input_output", c.share_decoder_input_output()}};
}

// Checkpoints written before model.init/model.positions existed used the defaults.
nlohmann::json WithShapeDefaults(nlohmann::json model) {
  if (model.is_object()) {
    if (!model.contains("init")) model["init"] = "paper";
    if (!model.contains("positions")) model["positions"] = "sinusoidal";
  }
  return model;
}

}  // namespace

Trainer::Trainer(const job::JobConfig& config, const TrainerIo& io) : config_(config), io_(io) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const job::JobConfig& config,
                                                         const TrainerIo& io,
                                                         comm::Communicator* world) {
  std::unique_ptr<Trainer> trainer(new Trainer(config, io));
  if (auto status = trainer->Setup(world); !status.ok()) return status;
  return trainer;
}

bool Trainer::reports() const { return world_->rank() == 0; }

absl::Status Trainer::Setup(comm::Communicator* world) {
  if (world == nullptr) {
    own_world_ = std::make_unique<comm::LoopbackCommunicator>();
    world = own_world_.get();
  }
  world_ = world;
  std::ostream* out = reports() ? io_.out : nullptr;
  if (out == nullptr) {
    static NullBuffer null_buffer;
    null_out_ = std::make_unique<std::ostream>(&null_buffer);
    out = null_out_.get();
  }
  reporter_ = std::make_unique<ProgressReporter>(out, io_.format, io_.live && reports());
  const std::string device_name = job::ToString(config_.runtime.device);
  try {
    device_ = torch::Device(device_name);
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError("runtime.device: unknown device '" + device_name + "'");
  }
  if (device_.is_cuda() && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError("runtime.device: " + device_name +
                                         " requested but no CUDA device is available");
  }
  const model::AttentionBackend attention = AttentionBackendOf(config_.runtime.attention);
  if (attention == model::AttentionBackend::kSdpa && !model::SdpaAvailable()) {
    return absl::FailedPreconditionError(
        "runtime.attention: sdpa needs LibTorch >= 2.0 (at::scaled_dot_product_attention); this "
        "trainer is built with LibTorch " TORCH_VERSION "; use auto or reference");
  }
  model::SetAttentionBackend(attention);

  auto data = LoadTrainingData(config_.data);
  if (!data.ok()) return data.status();
  data_ = *std::move(data);
  if (!data_.tokenizer_model_path.empty()) {
    std::ifstream in(data_.tokenizer_model_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::NotFoundError("cannot read tokenizer model " + data_.tokenizer_model_path);
    }
    tokenizer_model_ = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
    std::memcpy(tokenizer_model_.data_ptr(), bytes.data(), bytes.size());
  }
  auto& mc = config_.model;
  const int64_t vocab = data_.tokenizer->vocab_size();
  if (mc.vocab_size() == 0) mc.vocab_size(vocab);
  if (mc.vocab_size() != vocab) {
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", mc.vocab_size(),
                                                   " does not match the tokenizer's ", vocab));
  }
  mc.pad_id(data_.tokenizer->pad_id());
  // Before anything of the model is allocated: the estimate against this rank's memory.
  if (absl::Status fits = CheckMemory(job::EstimateJobMemory(config_, vocab), io_.memory);
      !fits.ok()) {
    return fits;
  }
  int64_t longest = 0, src_sum = 0, tgt_sum = 0, count = 0;
  for (const auto& pair : data_.pairs) {
    for (const auto& ex : pair.train) {
      longest = std::max<int64_t>(longest, std::max(ex.src.size(), ex.tgt.size()));
      src_sum += static_cast<int64_t>(ex.src.size());
      tgt_sum += static_cast<int64_t>(ex.tgt.size());
      ++count;
    }
  }
  if (longest > mc.max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.max_positions: ", mc.max_positions(), " is shorter than the longest example (",
        longest, " tokens); raise it or lower data.max_len"));
  }

  const auto& par = config_.parallel;
  // Dropout streams differ between ranks; rank 0 of any layout draws what one process does.
  torch::manual_seed(config_.train.seed + 1000003ULL * static_cast<uint64_t>(world_->rank()));
  pipeline::EngineOptions engine = EngineOptionsFor(config_, mc, device_);
  if (count > 0) {
    engine.source_length = std::max<int64_t>(1, src_sum / count);
    engine.target_length = std::max<int64_t>(1, tgt_sum / count);
  }
  // Sentences of a typical batch: the token bound over the padded length of a typical pair.
  engine.batch_sentences = std::max<int64_t>(
      1, config_.data.max_tokens / std::max<int64_t>(1, std::max(engine.source_length,
                                                                 engine.target_length)));
  if (config_.data.max_sentences > 0) {
    engine.batch_sentences = std::min(engine.batch_sentences, config_.data.max_sentences);
  }
  auto created = pipeline::PipelineEngine::Create(engine, world_);
  if (!created.ok()) return created.status();
  engine_ = *std::move(created);
  if (world_->size() > 1) {
    std::string layout = pipeline::DescribePlan(engine_->plan());
    while (!layout.empty() && layout.back() == '\n') layout.pop_back();
    for (int r = 0; r < world_->size(); ++r) {
      layout += absl::StrCat("\n  rank ", r, ": stage ", r / par.data_parallel, ", replica ",
                             r % par.data_parallel);
    }
    reporter_->Event(job::MessageLine{
        job::ProgressEvent::kLayout,
        absl::StrCat(par.pipeline_stages, " stage(s) x ", par.data_parallel, " replica(s), ",
                     par.micro_batches * config_.optim.accum_steps, " micro-batch(es), ",
                     job::ToString(par.schedule), " over ", world_->backend(), "\n", layout)});
  }

  data::MultilingualStreamOptions stream_options;
  stream_options.temperature = config_.data.temperature;
  stream_options.seed = config_.train.seed;
  stream_options.batching.max_tokens = config_.data.max_tokens;
  stream_options.batching.max_sentences = config_.data.max_sentences;
  stream_options.rank = engine_->replica();
  stream_options.world = par.data_parallel;
  std::vector<const std::vector<data::TokenizedExample>*> train_sets;
  for (const auto& pair : data_.pairs) train_sets.push_back(&pair.train);
  stream_ = std::make_unique<data::MultilingualBatchStream>(train_sets, stream_options);
  consumed_state_ = stream_->state();

  if (auto status = SetUpProbe(); !status.ok()) return status;

  if (job::GuardEnabled(config_)) guard_ = std::make_unique<TrainingGuard>(config_.guard);
  const auto& ckpt = config_.checkpoint;
  if (!ckpt.dir.empty()) {
    checkpoint::CheckpointStoreOptions options;
    options.dir = ckpt.dir;
    options.keep_last = static_cast<int>(ckpt.keep_last);
    options.fence = io_.checkpoint_fence;
    auto store = checkpoint::CheckpointStore::Open(options);
    if (!store.ok()) return store.status();
    store_ = *std::move(store);
    if (ckpt.resume) {
      if (auto status = Resume(); !status.ok()) return status;
    }
  }
  if (step_ == 0 && !probe_schedule_.empty() && !engine_->has_probe_reference()) {
    if (auto f0 = ProbeNorm(); !f0.ok()) return f0.status();
  }
  return absl::OkStatus();
}

absl::Status Trainer::CheckResumable(const nlohmann::json& meta) const {
  const nlohmann::json expected = ModelShape(config_.model);
  if (meta.contains("model") && WithShapeDefaults(meta["model"]) == expected) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint step ", meta.value("step", int64_t{-1}), " in ", config_.checkpoint.dir,
      " was trained with model ", meta.value("model", nlohmann::json()).dump(),
      " but the config has ", expected.dump(),
      "; use another checkpoint.dir or set checkpoint.resume: false"));
}

absl::Status Trainer::RestoreStream(const pipeline::ResumePoint& point) {
  const auto& meta = point.metadata;
  data::StreamState stream_state;
  try {
    stream_state.position = meta.at("data_stream").at("position").get<int64_t>();
    for (const auto& c : meta.at("data_stream").at("pair_cursors")) {
      stream_state.pair_cursors.push_back({c.at(0).get<int64_t>(), c.at(1).get<int64_t>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(point.path, ": bad data_stream metadata: ", e.what()));
  }
  if (auto s = stream_->Restore(stream_state); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint step ", point.step, ": ", s.message()));
  }
  consumed_state_ = stream_state;
  return absl::OkStatus();
}

absl::Status Trainer::Resume() {
  auto check = [this](const nlohmann::json& meta) { return CheckResumable(meta); };
  auto point = engine_->Resume(*store_, check, &rejected_);
  for (const auto& r : rejected_) reporter_->Event(job::RejectedCheckpointLine{r});
  if (!point.ok()) return absl::IsNotFound(point.status()) ? absl::OkStatus() : point.status();
  if (auto s = RestoreStream(*point); !s.ok()) return s;
  // The guard's retries and learning-rate scale survive a restart.
  if (guard_ && point->metadata.contains("guard")) guard_->RestoreState(point->metadata["guard"]);
  step_ = point->step;
  reporter_->Event(job::ResumeLine{step_, point->path, !point->same_layout});
  return absl::OkStatus();
}

const std::vector<data::TokenizedExample>& Trainer::ProbeSet() const {
  if (!probe_file_examples_.empty()) return probe_file_examples_;
  const LanguagePair& first = data_.pairs.front();
  return first.valid.empty() ? first.train : first.valid;
}

const pipeline::MicroBatch& Trainer::ProbeBatch() {
  // The probe set and indices are fixed at set-up: built (and copied to the device) once.
  if (!probe_batch_) {
    const SpecialIds ids{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()};
    probe_batch_ = ToMicroBatch(MakeBatch(ProbeSet(), probe_indices_, ids, device_), device_);
  }
  return *probe_batch_;
}

absl::StatusOr<pipeline::ProbeNorms> Trainer::ProbeNorm() { return engine_->Probe(ProbeBatch()); }

absl::StatusOr<StepMetrics> Trainer::TrainStep() {
  std::vector<pipeline::MicroBatch> micro;
  last_data_wait_s_ = 0.0;
  const int64_t batches = config_.parallel.micro_batches * config_.optim.accum_steps;
  for (int64_t i = 0; i < batches; ++i) {
    double waited = 0.0;
    PreparedBatch prepared = prefetcher_->Pop(&waited);
    last_data_wait_s_ += waited;
    consumed_state_ = std::move(prepared.state_after);
    micro.push_back(ToMicroBatch(std::move(prepared.tensors), device_));
  }
  StepMetrics m;
  m.step = step_ + 1;
  // The guard may have restarted the warm-up (a plateau) and scaled the rate (rollbacks).
  const int64_t warmup_from = guard_ ? guard_->warmup_from() : 0;
  m.lr =
      pipeline::InverseSqrtLearningRate(m.step - warmup_from, config_.optim.lr,
                                        config_.optim.warmup_steps, config_.optim.warmup_init_lr) *
      (guard_ ? guard_->lr_scale() : 1.0);
  auto totals = engine_->TrainStep(micro, m.step, m.lr);
  if (!totals.ok()) return totals.status();
  step_ = m.step;
  m.grad_norm = totals->grad_norm;
  m.src_tokens = totals->src_tokens;
  m.tgt_tokens = totals->tgt_tokens;
  m.loss = totals->loss_sum / static_cast<double>(std::max<int64_t>(1, totals->tgt_tokens));
  m.nll = totals->nll_sum / static_cast<double>(std::max<int64_t>(1, totals->tgt_tokens));
  if (world_->size() > 1) {
    for (int64_t s = 0; s < config_.parallel.pipeline_stages; ++s) {
      const pipeline::RankTiming& t = totals->ranks[s * config_.parallel.data_parallel];
      m.stage_compute_s.push_back(t.compute_s);
      m.stage_idle.push_back(t.schedule_s > 0 ? 1.0 - t.compute_s / t.schedule_s : 0.0);
    }
  }
  if (device_.is_cuda()) {  // Host-side counters of the caching allocator: no device sync.
    const GpuMemory gpu = CudaMemory(device_.has_index() ? device_.index() : 0);
    m.on_gpu = true;
    m.gpu_allocated_bytes = gpu.allocated;
    m.gpu_reserved_bytes = gpu.reserved;
    m.gpu_peak_allocated_bytes = gpu.peak_allocated;
  }
  return m;
}

absl::StatusOr<job::ValidLine> Trainer::Validate() {
  job::ValidLine v;
  v.step = step_;
  if (data_.valid_examples() == 0) return v;
  data::TokenBatcherOptions options;
  options.max_tokens = config_.data.max_tokens;
  options.shuffle = false;
  const SpecialIds ids{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()};
  const int64_t cap = config_.train.valid_max_pairs;
  // Every rank lists the same batches; replica r evaluates batches r, r + D, ...
  std::vector<pipeline::MicroBatch> mine;
  int64_t index = 0;
  for (const auto& pair : data_.pairs) {
    const size_t count = cap > 0 ? std::min<size_t>(pair.valid.size(), static_cast<size_t>(cap))
                                 : pair.valid.size();
    const std::vector<data::TokenizedExample> valid(pair.valid.begin(), pair.valid.begin() + count);
    data::TokenBatcher batches(&valid, options);
    for (const auto& indices : batches.batches()) {
      if (index++ % config_.parallel.data_parallel == engine_->replica()) {
        mine.push_back(ToMicroBatch(MakeBatch(valid, indices, ids, device_), device_));
      }
    }
  }
  auto sums = engine_->Evaluate(mine);
  if (!sums.ok()) return sums.status();
  v.tokens = sums->tokens;
  v.loss = sums->loss / std::max<int64_t>(1, v.tokens);
  v.nll = sums->nll / std::max<int64_t>(1, v.tokens);
  return v;
}

absl::StatusOr<std::string> Trainer::SaveCheckpoint() {
  nlohmann::json cursors = nlohmann::json::array();
  for (const auto& c : consumed_state_.pair_cursors) cursors.push_back({c.epoch, c.batch});
  nlohmann::json metadata = {
      {"data_stream", {{"position", consumed_state_.position}, {"pair_cursors", cursors}}},
      {"model", ModelShape(config_.model)},
      {"tokenizer", data_.tokenizer_kind},
      {"languages", data_.languages},
      {"job_config", job::DumpJobConfig(config_)}};
  if (guard_) metadata["guard"] = guard_->State();
  std::vector<std::pair<std::string, torch::Tensor>> extra;
  // The tokenizer travels with the weights: translate/eval need nothing but the checkpoint.
  if (tokenizer_model_.defined()) extra.emplace_back("tokenizer.model", tokenizer_model_);
  return engine_->SaveCheckpoint(*store_, step_, metadata, extra);
}

void Trainer::StartPrefetcher() {
  std::vector<const std::vector<data::TokenizedExample>*> train_sets;
  for (const auto& pair : data_.pairs) train_sets.push_back(&pair.train);
  prefetcher_ = std::make_unique<BatchPrefetcher>(
      stream_.get(), train_sets, SpecialIds{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()},
      static_cast<size_t>(config_.data.prefetch), config_.data.pack_tokens);
  prefetcher_->Start();
}

absl::StatusOr<TrainSummary> Trainer::Run() {
  TrainSummary summary;
  summary.start_step = step_;
  summary.rejected_checkpoints = rejected_;
  const auto& tc = config_.train;
  // The precision that runs, e.g. "bf16 on cuda (gradients reduced in fp32)".
  const std::string shape = absl::StrCat(
      model::DescribeShape(config_.model), ", ",
      job::ToString(job::EffectivePrecision(config_.runtime)), " on ",
      job::ToString(config_.runtime.device), " (gradients reduced in ",
      job::ToString(config_.runtime.grad_reduce), ")");
  reporter_->Event(job::StartLine{
      absl::StrCat(config_.name, ": ", shape, ", ", data_.train_examples(), " train / ",
                   data_.valid_examples(), " valid pairs in ", data_.pairs.size(), " directions"),
      step_, tc.max_steps});
  StartPrefetcher();
  const auto start = Clock::now();
  // A baseline before the first update, so even a short run shows the validation loss move.
  if (step_ == 0 && tc.valid_every > 0 && data_.valid_examples() > 0) {
    auto v = Validate();
    if (!v.ok()) return v.status();
    reporter_->Valid(*v);
  }
  std::deque<std::pair<double, int64_t>> recent;  // (seconds, tokens) of recent steps
  int64_t last_saved = -1;
  try {
    while (step_ < tc.max_steps) {
      // Ranks stop together: a signal or the time budget on any rank stops all of them.
      const bool signalled = io_.stop != nullptr && io_.stop->load();
      const bool out_of_time = tc.max_minutes > 0.0 && Seconds(start) >= tc.max_minutes * 60.0;
      auto stop = engine_->AnyRank(signalled || out_of_time);
      if (!stop.ok()) return stop.status();
      if (*stop) {
        auto by_signal = engine_->AnyRank(signalled);
        if (!by_signal.ok()) return by_signal.status();
        summary.stop_reason = *by_signal ? "signal" : "max_minutes";
        break;
      }
      const auto step_start = Clock::now();
      if (DiagnosticStep(step_ + 1)) engine_->MeasureLayerGradients();
      auto stepped = TrainStep();
      if (!stepped.ok()) return stepped.status();
      StepMetrics m = *stepped;
      if (io_.step_fault) io_.step_fault(&m);
      if (!guard_ && !std::isfinite(m.loss)) {
        return absl::InternalError(absl::StrCat("step ", m.step, ": loss is ", m.loss,
                                                " (diverged); last checkpoint: ", summary.last_checkpoint));
      }
      summary.data_wait_s += last_data_wait_s_;
      if (stage_compute_.empty()) stage_compute_.assign(m.stage_compute_s.size(), 0.0);
      for (size_t i = 0; i < m.stage_compute_s.size(); ++i) stage_compute_[i] += m.stage_compute_s[i];
      if (last_data_wait_s_ > 1e-3) ++summary.steps_waited_for_data;
      m.data_wait_s = last_data_wait_s_;
      recent.emplace_back(Seconds(step_start), m.src_tokens + m.tgt_tokens);
      if (recent.size() > 20) recent.pop_front();
      double secs = 0.0;
      int64_t tokens = 0;
      for (const auto& [s, t] : recent) secs += s, tokens += t;
      m.tokens_per_s = secs > 0 ? tokens / secs : 0.0;
      m.max_steps = tc.max_steps;
      m.elapsed_s = Seconds(start);
      m.eta_s = secs / recent.size() * static_cast<double>(tc.max_steps - step_);
      if (tc.max_minutes > 0.0) m.eta_s = std::min(m.eta_s, tc.max_minutes * 60.0 - m.elapsed_s);
      if (auto probed = ProbeAndDiagnose(&m); !probed.ok()) return probed;
      if (guard_) {  // Every rank, every step: the decision is collective.
        auto rolled_back = GuardStep(m, &summary);
        if (!rolled_back.ok()) return rolled_back.status();
        if (*rolled_back) {
          recent.clear();
          last_saved = step_;  // The restored checkpoint.
          continue;
        }
      }
      summary.losses.push_back(m.loss);
      reporter_->Live(m);
      if (step_ % tc.log_every == 0 || step_ == tc.max_steps) reporter_->Step(m);
      if (tc.valid_every > 0 && step_ % tc.valid_every == 0) {
        auto v = Validate();
        if (!v.ok()) return v.status();
        summary.last_valid = *v;
        reporter_->Valid(*summary.last_valid);
        GuardValidation(*v, &summary);
      }
      if (store_ && config_.checkpoint.every_steps > 0 && step_ % config_.checkpoint.every_steps == 0) {
        auto saved = SaveCheckpoint();
        if (!saved.ok()) return saved.status();
        summary.last_checkpoint = *saved;
        last_saved = step_;
        reporter_->Event(job::CheckpointLine{step_, *saved});
        if (guard_) guard_->CheckpointSaved(step_);
      }
    }
    if (summary.stop_reason.empty()) summary.stop_reason = "max_steps";
    if (data_.valid_examples() > 0 && (tc.valid_every > 0 || summary.stop_reason == "max_steps") &&
        (!summary.last_valid || summary.last_valid->step != step_)) {
      auto v = Validate();
      if (!v.ok()) return v.status();
      summary.last_valid = *v;
      reporter_->Valid(*summary.last_valid);
    }
    if (store_ && last_saved != step_ && step_ > summary.start_step) {
      auto saved = SaveCheckpoint();
      if (!saved.ok()) return saved.status();
      summary.last_checkpoint = *saved;
      reporter_->Event(job::CheckpointLine{step_, *saved});
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("step ", step_ + 1, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("step ", step_ + 1, ": ", e.what()));
  }
  summary.final_step = step_;
  prefetcher_.reset();  // Joins the loader thread.
  const int64_t steps_run = step_ - summary.start_step;
  if (!stage_compute_.empty() && steps_run > 0) {
    // Measured forward+backward time per stage next to the cost model's prediction.
    const auto& predicted = engine_->plan().predicted_cost;
    double measured_sum = 0.0, predicted_sum = 0.0;
    for (size_t i = 0; i < stage_compute_.size(); ++i) {
      measured_sum += stage_compute_[i];
      predicted_sum += predicted[i];
    }
    std::string text;
    for (size_t i = 0; i < stage_compute_.size(); ++i) {
      absl::StrAppend(&text, i ? "; " : "", "stage ", i, " ",
                      absl::StrFormat("%.3f s/step, %.1f%% of compute (predicted %.1f%%)",
                                      stage_compute_[i] / steps_run,
                                      100.0 * stage_compute_[i] / std::max(1e-12, measured_sum),
                                      100.0 * predicted[i] / std::max(1e-12, predicted_sum)));
    }
    reporter_->Event(job::MessageLine{job::ProgressEvent::kStages, text});
  }
  reporter_->Event(job::MessageLine{
      job::ProgressEvent::kStop,
      absl::StrCat("step ", step_, " (", summary.stop_reason, ") after ",
                   FormatDuration(Seconds(start)), "; ", summary.steps_waited_for_data, " of ",
                   steps_run, " steps waited for data (",
                   absl::StrFormat("%.3f", summary.data_wait_s), " s)")});
  return summary;
}

}  // namespace deepnet::train
