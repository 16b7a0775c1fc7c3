#include "worker/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/initialization.h"
#include "model/loss.h"
#include "model/model_stats.h"
#include "worker/batch_tensors.h"

namespace deepnet::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

torch::Tensor CpuGeneratorState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetCpuGeneratorState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The shape fields a checkpoint must agree on to be resumed.
nlohmann::json ModelShape(const model::DeepNetConfig& c) {
  return {{"encoder_layers", c.encoder_layers()},
          {"decoder_layers", c.decoder_layers()},
          {"d_model", c.d_model()},
          {"heads", c.heads()},
          {"ffn_dim", c.ffn_dim()},
          {"vocab_size", c.vocab_size()},
          {"norm", std::string(model::ToString(c.norm()))},
          {"share_all_embeddings", c.share_all_embeddings()},
          {"share_decoder_input_output", c.share_decoder_input_output()}};
}

}  // namespace

Trainer::Trainer(const JobConfig& config, const TrainerIo& io) : config_(config), io_(io) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const JobConfig& config,
                                                         const TrainerIo& io) {
  std::unique_ptr<Trainer> trainer(new Trainer(config, io));
  if (auto status = trainer->Setup(); !status.ok()) return status;
  return trainer;
}

absl::Status Trainer::Setup() {
  std::ostream* out = io_.out;
  if (out == nullptr) {
    static NullBuffer null_buffer;
    null_out_ = std::make_unique<std::ostream>(&null_buffer);
    out = null_out_.get();
  }
  reporter_ = std::make_unique<ProgressReporter>(out, io_.format, io_.live);
  try {
    device_ = torch::Device(config_.runtime.device);
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError("runtime.device: unknown device '" + config_.runtime.device + "'");
  }
  if (device_.is_cuda() && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError("runtime.device: " + config_.runtime.device +
                                         " requested but no CUDA device is available");
  }

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
  int64_t longest = 0;
  for (const auto& pair : data_.pairs) {
    for (const auto& ex : pair.train) {
      longest = std::max<int64_t>(longest, std::max(ex.src.size(), ex.tgt.size()));
    }
  }
  if (longest > mc.max_positions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.max_positions: ", mc.max_positions(), " is shorter than the longest example (",
        longest, " tokens); raise it or lower data.max_len"));
  }

  torch::manual_seed(config_.train.seed);
  try {
    model_ = model::DeepNet(mc);
    model::InitializeParameters(*model_, config_.train.seed);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", e.what_without_backtrace()));
  }
  model_->to(device_);
  flat_ = std::make_unique<FlatParameters>(*model_);
  AdamWOptions adam;
  adam.beta1 = config_.optim.beta1;
  adam.beta2 = config_.optim.beta2;
  adam.eps = config_.optim.eps;
  adam.weight_decay = config_.optim.weight_decay;
  optimizer_ = std::make_unique<AdamW>(flat_.get(), adam);

  data::MultilingualStreamOptions stream_options;
  stream_options.temperature = config_.data.temperature;
  stream_options.seed = config_.train.seed;
  stream_options.batching.max_tokens = config_.data.max_tokens;
  stream_options.batching.max_sentences = config_.data.max_sentences;
  std::vector<const std::vector<data::TokenizedExample>*> train_sets;
  for (const auto& pair : data_.pairs) train_sets.push_back(&pair.train);
  stream_ = std::make_unique<data::MultilingualBatchStream>(train_sets, stream_options);
  consumed_state_ = stream_->state();

  // The probe batch: the first validation pairs of the first language pair (its training
  // pairs when it has no validation set).
  const auto& probe_set = ProbeSet();
  for (int64_t i = 0; i < std::min<int64_t>(config_.train.probe_sentences, probe_set.size()); ++i) {
    probe_indices_.push_back(i);
  }

  const auto& ckpt = config_.checkpoint;
  if (!ckpt.dir.empty()) {
    CheckpointStoreOptions options;
    options.dir = ckpt.dir;
    options.keep_last = static_cast<int>(ckpt.keep_last);
    auto store = CheckpointStore::Open(options);
    if (!store.ok()) return store.status();
    store_ = *std::move(store);
    if (ckpt.resume) {
      auto latest = store_->LoadLatest(&rejected_);
      for (const auto& r : rejected_) reporter_->Event("checkpoint", "rejected: " + r);
      if (latest.ok()) {
        if (auto status = Resume(*latest); !status.ok()) return status;
      } else if (!absl::IsNotFound(latest.status())) {
        return latest.status();
      }
    }
  }
  if (step_ == 0 && config_.train.probe_every > 0) probe_f0_ = ProbeOutput();
  return absl::OkStatus();
}

absl::Status Trainer::Resume(const Checkpoint& ckpt) {
  const auto& meta = ckpt.metadata;
  const nlohmann::json expected = ModelShape(config_.model);
  if (!meta.contains("model") || meta["model"] != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint step ", ckpt.step, " in ", config_.checkpoint.dir, " was trained with model ",
        meta.value("model", nlohmann::json()).dump(), " but the config has ", expected.dump(),
        "; use another checkpoint.dir or set checkpoint.resume: false"));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < flat_->entries().size(); ++i) {
    const auto& entry = flat_->entries()[i];
    torch::Tensor saved = ckpt.Find(entry.name);
    if (!saved.defined()) return absl::NotFoundError("checkpoint lacks parameter " + entry.name);
    torch::Tensor view = flat_->View(flat_->values(), i);
    if (saved.sizes() != view.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint parameter ", entry.name,
                                                     " has shape ", c10::str(saved.sizes())));
    }
    view.copy_(saved);
  }
  auto opt = ckpt.files.find("optimizer.bin");
  if (opt == ckpt.files.end()) return absl::NotFoundError("checkpoint lacks optimizer.bin");
  if (auto s = optimizer_->ImportState(opt->second, meta.at("optimizer_steps").get<int64_t>());
      !s.ok()) {
    return s;
  }
  step_ = ckpt.step;
  data::StreamState stream_state;
  stream_state.position = meta.at("data_stream").at("position").get<int64_t>();
  for (const auto& c : meta.at("data_stream").at("pair_cursors")) {
    stream_state.pair_cursors.push_back({c.at(0).get<int64_t>(), c.at(1).get<int64_t>()});
  }
  if (auto s = stream_->Restore(stream_state); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint step ", ckpt.step, ": ", s.message()));
  }
  consumed_state_ = stream_state;
  torch::Tensor rng = ckpt.Find("rng.cpu");
  if (!rng.defined()) return absl::NotFoundError("checkpoint lacks rng.cpu");
  SetCpuGeneratorState(rng);
  probe_f0_ = ckpt.Find("probe.f0");
  if (probe_f0_.defined()) probe_f0_ = probe_f0_.to(device_);
  reporter_->Event("resume", absl::StrCat("resumed from step ", step_, " (", config_.checkpoint.dir, ")"));
  return absl::OkStatus();
}

const std::vector<data::TokenizedExample>& Trainer::ProbeSet() const {
  const LanguagePair& first = data_.pairs.front();
  return first.valid.empty() ? first.train : first.valid;
}

torch::Tensor Trainer::ProbeOutput() {
  const auto& set = ProbeSet();
  BatchTensors batch = MakeBatch(set, probe_indices_, {data_.tokenizer->pad_id(), data_.tokenizer->bos_id()}, device_);
  torch::NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  model::EncoderOutput enc;
  if (config_.model.encoder_layers() > 0) enc = model_->encode(batch.src);
  torch::Tensor f = config_.model.decoder_layers() > 0 ? model_->decode(batch.tgt_in, enc) : enc.out;
  // Padding positions do not belong to F(x).
  const auto& tokens = config_.model.decoder_layers() > 0 ? batch.tgt_out : batch.src;
  f = f.masked_fill(tokens.eq(data_.tokenizer->pad_id()).unsqueeze(-1), 0.0);
  model_->train(was_training);
  return f.detach().clone();
}

StepMetrics Trainer::TrainStep() {
  model_->train();
  const SpecialIds ids{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()};
  std::vector<BatchTensors> micro;
  int64_t tgt_tokens = 0;
  last_data_wait_s_ = 0.0;
  for (int64_t i = 0; i < config_.optim.accum_steps; ++i) {
    double waited = 0.0;
    PreparedBatch prepared = prefetcher_->Pop(&waited);
    last_data_wait_s_ += waited;
    consumed_state_ = std::move(prepared.state_after);
    BatchTensors batch = std::move(prepared.tensors);
    if (device_ != torch::kCPU) {
      batch.src = batch.src.to(device_);
      batch.tgt_in = batch.tgt_in.to(device_);
      batch.tgt_out = batch.tgt_out.to(device_);
    }
    tgt_tokens += batch.tgt_tokens;
    micro.push_back(std::move(batch));
  }
  flat_->ZeroGrad();
  StepMetrics m;
  double loss_sum = 0.0, nll_sum = 0.0;
  for (auto& batch : micro) {
    auto logits = model_->forward(batch.src, batch.tgt_in);
    auto out = model::LabelSmoothedCrossEntropy(logits, batch.tgt_out,
                                                config_.optim.label_smoothing, ids.pad);
    // Normalised by the step's target tokens: the same gradient as one batch of all of them.
    (out.loss / static_cast<double>(tgt_tokens)).backward();
    loss_sum += out.loss.item<double>();
    nll_sum += out.nll.item<double>();
    m.src_tokens += batch.src_tokens;
  }
  torch::NoGradGuard no_grad;
  m.grad_norm = flat_->grads().norm().item<double>();
  if (config_.optim.clip_norm > 0.0 && m.grad_norm > config_.optim.clip_norm) {
    flat_->grads().mul_(config_.optim.clip_norm / (m.grad_norm + 1e-6));
  }
  m.step = step_ + 1;
  m.lr = InverseSqrtLearningRate(m.step, config_.optim.lr, config_.optim.warmup_steps,
                                 config_.optim.warmup_init_lr);
  optimizer_->Step(m.lr);
  step_ = m.step;
  m.tgt_tokens = tgt_tokens;
  m.loss = loss_sum / static_cast<double>(tgt_tokens);
  m.nll = nll_sum / static_cast<double>(tgt_tokens);
  return m;
}

ValidMetrics Trainer::Validate() {
  ValidMetrics v;
  v.step = step_;
  if (data_.valid_examples() == 0) return v;
  data::TokenBatcherOptions options;
  options.max_tokens = config_.data.max_tokens;
  options.shuffle = false;
  torch::NoGradGuard no_grad;
  model_->eval();
  double loss = 0.0, nll = 0.0;
  const SpecialIds ids{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()};
  const int64_t cap = config_.train.valid_max_pairs;
  for (const auto& pair : data_.pairs) {
    const size_t count = cap > 0 ? std::min<size_t>(pair.valid.size(), static_cast<size_t>(cap))
                                 : pair.valid.size();
    const std::vector<data::TokenizedExample> valid(pair.valid.begin(), pair.valid.begin() + count);
    data::TokenBatcher batches(&valid, options);
    for (const auto& indices : batches.batches()) {
      BatchTensors batch = MakeBatch(valid, indices, ids, device_);
      auto out = model::LabelSmoothedCrossEntropy(model_->forward(batch.src, batch.tgt_in),
                                                  batch.tgt_out, config_.optim.label_smoothing,
                                                  ids.pad);
      loss += out.loss.item<double>();
      nll += out.nll.item<double>();
      v.tokens += out.tokens;
    }
  }
  model_->train();
  v.loss = loss / std::max<int64_t>(1, v.tokens);
  v.nll = nll / std::max<int64_t>(1, v.tokens);
  return v;
}

absl::StatusOr<std::string> Trainer::SaveCheckpoint() {
  Checkpoint ckpt;
  ckpt.step = step_;
  auto& model_file = ckpt.files["model.bin"];
  for (size_t i = 0; i < flat_->entries().size(); ++i) {
    model_file.emplace_back(flat_->entries()[i].name, flat_->View(flat_->values(), i));
  }
  ckpt.files["optimizer.bin"] = optimizer_->ExportState();
  auto& state = ckpt.files["trainer.bin"];
  state.emplace_back("rng.cpu", CpuGeneratorState());
  if (probe_f0_.defined()) state.emplace_back("probe.f0", probe_f0_);
  // The tokenizer travels with the weights: translate/eval need nothing but the checkpoint.
  if (tokenizer_model_.defined()) state.emplace_back("tokenizer.model", tokenizer_model_);
  nlohmann::json cursors = nlohmann::json::array();
  for (const auto& c : consumed_state_.pair_cursors) cursors.push_back({c.epoch, c.batch});
  ckpt.metadata = {{"optimizer_steps", optimizer_->step_count()},
                   {"data_stream", {{"position", consumed_state_.position}, {"pair_cursors", cursors}}},
                   {"model", ModelShape(config_.model)},
                   {"tokenizer", data_.tokenizer_kind},
                   {"languages", data_.languages},
                   {"job_config", DumpJobConfig(config_)}};
  return store_->Save(ckpt);
}

absl::StatusOr<TrainSummary> Trainer::Run() {
  TrainSummary summary;
  summary.start_step = step_;
  summary.rejected_checkpoints = rejected_;
  const auto& tc = config_.train;
  reporter_->Event("start", absl::StrCat(config_.name, ": ", model::DescribeShape(config_.model),
                                         ", ", data_.train_examples(), " train / ",
                                         data_.valid_examples(), " valid pairs in ",
                                         data_.pairs.size(), " directions, from step ", step_,
                                         " to ", tc.max_steps));
  std::vector<const std::vector<data::TokenizedExample>*> train_sets;
  for (const auto& pair : data_.pairs) train_sets.push_back(&pair.train);
  prefetcher_ = std::make_unique<BatchPrefetcher>(
      stream_.get(), train_sets, SpecialIds{data_.tokenizer->pad_id(), data_.tokenizer->bos_id()},
      static_cast<size_t>(config_.data.prefetch));
  prefetcher_->Start();
  const auto start = Clock::now();
  // A baseline before the first update, so even a short run shows the validation loss move.
  if (step_ == 0 && tc.valid_every > 0 && data_.valid_examples() > 0) {
    reporter_->Valid(Validate());
  }
  std::deque<std::pair<double, int64_t>> recent;  // (seconds, tokens) of recent steps
  int64_t last_saved = -1;
  try {
    while (step_ < tc.max_steps) {
      if (io_.stop != nullptr && io_.stop->load()) {
        summary.stop_reason = "signal";
        break;
      }
      if (tc.max_minutes > 0.0 && Seconds(start) >= tc.max_minutes * 60.0) {
        summary.stop_reason = "max_minutes";
        break;
      }
      const auto step_start = Clock::now();
      StepMetrics m = TrainStep();
      if (!std::isfinite(m.loss)) {
        return absl::InternalError(absl::StrCat("step ", m.step, ": loss is ", m.loss,
                                                " (diverged); last checkpoint: ", summary.last_checkpoint));
      }
      summary.data_wait_s += last_data_wait_s_;
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
      if (tc.probe_every > 0 && probe_f0_.defined() && step_ % tc.probe_every == 0) {
        m.update_norm = (ProbeOutput() - probe_f0_).norm().item<double>();
      }
      summary.losses.push_back(m.loss);
      reporter_->Live(m);
      if (step_ % tc.log_every == 0 || step_ == tc.max_steps) reporter_->Step(m);
      if (tc.valid_every > 0 && step_ % tc.valid_every == 0) {
        summary.last_valid = Validate();
        reporter_->Valid(*summary.last_valid);
      }
      if (store_ && config_.checkpoint.every_steps > 0 && step_ % config_.checkpoint.every_steps == 0) {
        auto saved = SaveCheckpoint();
        if (!saved.ok()) return saved.status();
        summary.last_checkpoint = *saved;
        last_saved = step_;
        reporter_->Event("checkpoint", "saved " + *saved);
      }
    }
    if (summary.stop_reason.empty()) summary.stop_reason = "max_steps";
    if (data_.valid_examples() > 0 && (tc.valid_every > 0 || summary.stop_reason == "max_steps") &&
        (!summary.last_valid || summary.last_valid->step != step_)) {
      summary.last_valid = Validate();
      reporter_->Valid(*summary.last_valid);
    }
    if (store_ && last_saved != step_ && step_ > summary.start_step) {
      auto saved = SaveCheckpoint();
      if (!saved.ok()) return saved.status();
      summary.last_checkpoint = *saved;
      reporter_->Event("checkpoint", "saved " + *saved);
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("step ", step_ + 1, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("step ", step_ + 1, ": ", e.what()));
  }
  summary.final_step = step_;
  prefetcher_.reset();  // Joins the loader thread.
  const int64_t steps_run = step_ - summary.start_step;
  reporter_->Event("stop", absl::StrCat("step ", step_, " (", summary.stop_reason, ") after ",
                                        FormatDuration(Seconds(start)), "; ",
                                        summary.steps_waited_for_data, " of ", steps_run,
                                        " steps waited for data (",
                                        absl::StrFormat("%.3f", summary.data_wait_s), " s)"));
  return summary;
}

}  // namespace deepnet::worker
