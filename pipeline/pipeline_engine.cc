#include "pipeline/pipeline_engine.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <set>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/initialization.h"
#include "pipeline/layer_cost_probe.h"

namespace deepnet::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

constexpr int kTimingFields = 7;

constexpr int kActivation = kActivationMessage;
constexpr int kGradient = kGradientMessage;

}  // namespace

int64_t LayerOfParameter(const std::string& name, int64_t encoder_layers) {
  for (const auto& [prefix, base] :
       {std::pair<std::string, int64_t>{"encoder.layers.", 0}, {"decoder.layers.", encoder_layers}}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    int64_t index = 0;
    if (dot != std::string::npos && absl::SimpleAtoi(name.substr(prefix.size(), dot - prefix.size()), &index)) {
      return base + index;
    }
  }
  return -1;
}

PipelineEngine::PipelineEngine(const EngineOptions& options, comm::Communicator* world)
    : options_(options), world_(world) {}
PipelineEngine::~PipelineEngine() = default;

absl::StatusOr<std::unique_ptr<PipelineEngine>> PipelineEngine::Create(const EngineOptions& options,
                                                                       comm::Communicator* world) {
  if (world == nullptr) return absl::InvalidArgumentError("pipeline engine needs a communicator");
  if (options.stages * options.replicas != world->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parallel: the launch has ", world->size(), " ranks but parallel.pipeline_stages x "
        "parallel.data_parallel = ", options.stages, " x ", options.replicas, " = ",
        options.stages * options.replicas));
  }
  std::unique_ptr<PipelineEngine> engine(new PipelineEngine(options, world));
  if (auto status = engine->Setup(); !status.ok()) return status;
  return engine;
}

std::string PipelineEngine::Where() const {
  return absl::StrCat("rank ", world_->rank(), " (stage ", stage_, ", replica ", replica_, ")");
}

absl::Status PipelineEngine::Setup() {
  const auto& c = options_.model;
  stage_ = world_->rank() / static_cast<int>(options_.replicas);
  replica_ = world_->rank() % static_cast<int>(options_.replicas);
  LayerCostModel costs = EstimateLayerCosts(c, options_.source_length, options_.target_length);
  if (options_.measure_layer_costs && options_.stages > 1) {
    // Rank 0 times the layers; everyone splits by its numbers, so the plan is the same.
    torch::Tensor shared = torch::zeros({5}, torch::kDouble);
    if (world_->rank() == 0) {
      LayerCostProbeOptions probe;
      probe.batch = options_.batch_sentences;
      probe.source = options_.source_length;
      probe.target = options_.target_length;
      probe.device = options_.device;
      const LayerCostModel m = MeasureLayerCosts(c, probe);
      shared = torch::tensor({m.encoder_layer, m.decoder_layer, m.source_embedding,
                              m.target_embedding, m.output_layer}, torch::kDouble);
    }
    if (auto s = world_->Broadcast(shared, 0); !s.ok()) return s;
    auto v = shared.accessor<double, 1>();
    costs = {v[0], v[1], v[2], v[3], v[4]};
  }
  auto plan = PartitionStages(c, static_cast<int>(options_.stages), costs);
  if (!plan.ok()) return plan.status();
  plan_ = *std::move(plan);
  const model::ModelSlice& slice = plan_.slices[stage_];
  try {
    model_ = model::DeepNet(c, slice);
    model::InitializeParameters(*model_, options_.seed);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", e.what_without_backtrace()));
  }
  model_->to(options_.device);
  flat_ = std::make_unique<FlatParameters>(*model_);
  optimizer_ = std::make_unique<AdamW>(flat_.get(), options_.adam);
  for (size_t i = 0; i < flat_->entries().size(); ++i) entry_index_[flat_->entries()[i].name] = i;

  // Groups. Split is collective over the world: every rank makes the same calls in order.
  if (options_.replicas > 1) {
    auto group = world_->Split(stage_, replica_);
    if (!group.ok()) return group.status();
    data_group_ = *std::move(group);
  }
  std::map<std::string, std::vector<int>> holders;  // Table name -> stages holding it.
  for (int s = 0; s < static_cast<int>(options_.stages); ++s) {
    for (const auto& name : model::TableParameterNames(c, plan_.slices[s])) holders[name].push_back(s);
  }
  for (const auto& [name, stages] : holders) {
    if (stages.size() < 2) continue;
    const bool mine = std::find(stages.begin(), stages.end(), stage_) != stages.end();
    auto group = world_->Split(mine ? 0 : -1, world_->rank());
    if (!group.ok()) return group.status();
    if (!mine) continue;
    TiedTable tied;
    tied.name = name;
    tied.entry = entry_index_.at(name);
    tied.counts_in_norm = stages.front() == stage_;
    tied.group = *std::move(group);
    tied_.push_back(std::move(tied));
  }
  // More segments than buckets buys nothing; one segment when there is nothing to overlap.
  const int64_t bytes = flat_->numel() * static_cast<int64_t>(sizeof(float));
  const int64_t segments =
      options_.replicas > 1 ? (bytes + options_.bucket_bytes - 1) / options_.bucket_bytes : 1;
  compute_ = std::make_unique<StageCompute>(model_.get(), segments, options_.label_smoothing,
                                            options_.recompute_layers);
  // Boundary tensors travel as options_.boundary_dtype (bf16 under bf16 precision) and arrive
  // as float32, the residual stream's dtype.
  transfer_ = std::make_unique<BoundaryTransfer>(world_, options_.device);
  transfer_->set_wire_dtype(options_.boundary_dtype);
  compute_->set_bf16_autocast(options_.precision == model::ComputePrecision::kBf16,
                              options_.device.type());
  if (options_.device.is_cuda()) {
    model::AllowTf32(options_.precision != model::ComputePrecision::kFp32);
  }
  PlanBuckets();
  // A token for this run's shared temporary checkpoint folders, chosen by rank 0.
  auto token = BroadcastString(absl::StrCat(
      std::chrono::system_clock::now().time_since_epoch().count() % 1000000007, "-", ::getpid()));
  if (!token.ok()) return token.status();
  run_token_ = *std::move(token);
  return absl::OkStatus();
}

void PipelineEngine::PlanBuckets() {
  buckets_.clear();
  if (options_.replicas < 2) return;
  std::set<size_t> tied_entries;
  for (const auto& t : tied_) tied_entries.insert(t.entry);
  const int64_t limit = std::max<int64_t>(1, options_.bucket_bytes / static_cast<int64_t>(sizeof(float)));
  const int64_t n = options_.model.encoder_layers();
  Bucket current;
  bool open = false;
  const auto& entries = flat_->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (tied_entries.count(i)) {  // Reduced over its tied group instead.
      if (open) buckets_.push_back(current);
      open = false;
      continue;
    }
    const int64_t layer = LayerOfParameter(entries[i].name, n);
    // Tables and final norms are used by the first or last segment; reduce them last.
    const int ready = layer < 0 ? 0 : compute_->SegmentOfLayer(layer);
    if (open && current.numel + entries[i].numel > limit) {
      buckets_.push_back(current);
      open = false;
    }
    if (!open) {
      current = Bucket{entries[i].offset, 0, ready};
      open = true;
    }
    current.numel += entries[i].numel;
    current.ready_segment = std::min(current.ready_segment, ready);
  }
  if (open) buckets_.push_back(current);
}

IncomingMessage PipelineEngine::Expect(int from_stage, int kind, int64_t step, int micro_batch,
                                       const MicroBatch& batch, int64_t boundary) const {
  IncomingMessage in;
  in.peer_rank = WorldRank(from_stage, replica_);
  in.peer_stage = from_stage;
  in.kind = kind;
  in.step = step;
  in.micro_batch = micro_batch;
  in.shapes = BoundaryShapes(options_.model, boundary, batch.tgt_out.size(0),
                             batch.src.defined() && batch.src.dim() == 2 ? batch.src.size(1) : 0,
                             batch.tgt_out.size(1));
  return in;
}

absl::Status PipelineEngine::RunTransfers(size_t begin, size_t end,
                                          const std::vector<MicroBatch>& micro, int64_t step,
                                          std::map<int, std::vector<torch::Tensor>>& outputs,
                                          std::map<int, std::vector<torch::Tensor>>& in_grads,
                                          std::map<int, std::vector<torch::Tensor>>& inputs,
                                          std::map<int, std::vector<torch::Tensor>>& out_grads) {
  std::vector<OutgoingMessage> outgoing;
  std::vector<IncomingMessage> incoming;
  std::vector<std::vector<torch::Tensor>*> targets;
  for (size_t k = begin; k < end; ++k) {
    const PipelineAction& a = schedule_[stage_][k];
    const int j = a.micro_batch;
    switch (a.type) {
      case ActionType::kSendActivation:
      case ActionType::kSendGradient: {
        const bool activation = a.type == ActionType::kSendActivation;
        auto& source = activation ? outputs : in_grads;
        outgoing.push_back(OutgoingMessage{std::move(source[j]), WorldRank(a.peer, replica_),
                                           activation ? kActivation : kGradient, step, j});
        source.erase(j);
        break;
      }
      case ActionType::kRecvActivation:
        incoming.push_back(Expect(a.peer, kActivation, step, j, micro[j], compute_->first_layer()));
        targets.push_back(&inputs[j]);
        break;
      case ActionType::kRecvGradient:
        incoming.push_back(Expect(a.peer, kGradient, step, j, micro[j], compute_->end_layer()));
        targets.push_back(&out_grads[j]);
        break;
      default:
        return absl::InternalError(absl::StrCat(Where(), ": schedule position ", k, " (",
                                                ToString(a.type), ") is not a transfer"));
    }
  }
  auto received = transfer_->Exchange(outgoing, incoming, Where());
  if (!received.ok()) return received.status();
  for (size_t m = 0; m < targets.size(); ++m) *targets[m] = std::move((*received)[m]);
  return absl::OkStatus();
}

absl::StatusOr<StepTotals> PipelineEngine::TrainStep(const std::vector<MicroBatch>& micro,
                                                     int64_t step, double lr) {
  const auto step_start = Clock::now();
  StepTotals totals;
  RankTiming timing;
  const int m = static_cast<int>(micro.size());
  if (m == 0) return absl::InvalidArgumentError("a step needs at least one micro-batch");
  if (schedule_.empty() || static_cast<int>(schedule_.size()) != options_.stages ||
      std::count_if(schedule_[stage_].begin(), schedule_[stage_].end(),
                    [](const PipelineAction& a) { return a.type == ActionType::kForward; }) != m) {
    auto schedule = BuildSchedule(options_.schedule, static_cast<int>(options_.stages), m);
    if (!schedule.ok()) return schedule.status();
    if (auto s = CheckSchedule(*schedule, m); !s.ok()) return s;
    schedule_ = *std::move(schedule);
    for (const auto& a : schedule_[stage_]) {
      if (a.type == ActionType::kBackward) last_backward_ = a.micro_batch;
    }
  }
  // The loss is divided by the global batch's target tokens and gradients are summed over the
  // replicas: the same gradient as one process training on all of the step's batches.
  torch::Tensor counts = torch::zeros({2}, torch::kDouble);
  for (const auto& b : micro) {
    counts[0] += static_cast<double>(b.tgt_tokens);
    counts[1] += static_cast<double>(b.src_tokens);
  }
  if (data_group_) {
    if (auto s = data_group_->AllReduceSum(counts); !s.ok()) return s;
  }
  const double global_tgt = counts[0].item<double>();
  const double scale = 1.0 / std::max(1.0, global_tgt);

  flat_->ZeroGrad();
  model_->train();
  // Weight casts are shared by the step's micro-batches until the step's end (any return).
  struct StepBounds {
    StageCompute* compute;
    explicit StepBounds(StageCompute* c) : compute(c) { compute->BeginStep(); }
    ~StepBounds() { compute->EndStep(); }
  } step_bounds(compute_.get());
  std::map<int, std::vector<torch::Tensor>> inputs, outputs, out_grads, in_grads;
  LossSums sums;
  auto launch_buckets = [&](int segment) {
    for (const auto& b : buckets_) {
      if (b.ready_segment != segment) continue;
      torch::Tensor bucket = flat_->grads().narrow(0, b.offset, b.numel);
      torch::Tensor reduced = bucket;
      if (options_.grad_reduce_dtype != bucket.scalar_type()) {
        // A backend that sums bf16 (NCCL) gets bf16. The others (Gloo, MPI) sum the bf16-rounded
        // values in fp32 (no bytes saved), and the sum is rounded to bf16 as well.
        reduced = bucket.to(options_.grad_reduce_dtype);
        const bool sums_natively = options_.grad_reduce_dtype == torch::kBFloat16 &&
                                   data_group_->capabilities().bf16_sums;
        if (!sums_natively) reduced = reduced.to(bucket.scalar_type());
      }
      if (!reduced.is_same(bucket)) reduce_copies_.emplace_back(bucket, reduced);
      auto work = data_group_->AllReduceSumAsync(reduced);
      if (!work.ok()) throw std::runtime_error(std::string(work.status().message()));
      pending_reductions_.push_back(*std::move(work));
    }
  };
  const auto schedule_start = Clock::now();
  try {
    const std::vector<PipelineAction>& actions = schedule_[stage_];
    for (size_t k = 0; k < actions.size(); ++k) {
      const PipelineAction& a = actions[k];
      const int j = a.micro_batch;
      auto t0 = Clock::now();
      switch (a.type) {
        case ActionType::kRecvActivation:
        case ActionType::kRecvGradient:
        case ActionType::kSendActivation:
        case ActionType::kSendGradient: {
          // The whole group (the tick's sends and receives) as one grouped operation.
          size_t end = k + 1;
          while (a.group >= 0 && end < actions.size() && actions[end].group == a.group) ++end;
          if (auto s = RunTransfers(k, end, micro, step, outputs, in_grads, inputs, out_grads);
              !s.ok()) {
            return s;
          }
          k = end - 1;
          timing.wait_s += Since(t0);
          break;
        }
        case ActionType::kForward: {
          const double cpu0 = ThreadCpuSeconds();
          outputs[j] = compute_->Forward(j, micro[j], inputs[j], scale, &sums);
          inputs.erase(j);
          timing.compute_cpu_s += ThreadCpuSeconds() - cpu0;
          timing.compute_s += Since(t0);
          timing.peak_live = std::max(timing.peak_live,
                                      static_cast<double>(compute_->live_micro_batches()));
          break;
        }
        case ActionType::kBackward: {
          std::function<void(int)> done;
          if (j == last_backward_ && !buckets_.empty() && options_.overlap_reduction) {
            done = launch_buckets;
          }
          const double cpu0 = ThreadCpuSeconds();
          in_grads[j] = compute_->Backward(j, out_grads[j], done);
          out_grads.erase(j);
          outputs.erase(j);
          timing.compute_cpu_s += ThreadCpuSeconds() - cpu0;
          timing.compute_s += Since(t0);
          break;
        }
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(Where(), " step ", step, ": ", e.what_without_backtrace()));
  } catch (const std::runtime_error& e) {
    return absl::InternalError(absl::StrCat(Where(), " step ", step, ": ", e.what()));
  }
  auto t0 = Clock::now();
  timing.schedule_s = Since(schedule_start);
  if (!options_.overlap_reduction) {
    try {
      for (int k = compute_->num_segments() - 1; k >= 0 && !buckets_.empty(); --k) launch_buckets(k);
    } catch (const std::runtime_error& e) {
      return absl::InternalError(absl::StrCat(Where(), " step ", step, ": ", e.what()));
    }
  }
  const auto reduce_start = Clock::now();
  if (auto s = ReduceGradients(); !s.ok()) return s;
  timing.reduce_wait_s = Since(reduce_start);

  // Global norm: each distinct parameter counted once (replica 0; tied tables on their first
  // holder stage), together with the step's loss sums from the last stage.
  torch::NoGradGuard no_grad;
  double sumsq = 0.0;
  if (replica_ == 0) {
    // On the device as norm reductions (no squared copy of the gradients; on the CPU they
    // accumulate in double), one wait for the host; the squares and their difference in
    // float64. (A BLAS dot accumulates in float: its rounding moved the clipping coefficient
    // enough that layouts stopped matching one process to 1e-5.)
    RECORD_USER_SCOPE("deepnet::grad_norm");
    const auto squares = [](const torch::Tensor& g) {
      return at::linalg_vector_norm(g.reshape({-1}), 2).to(torch::kDouble).square();
    };
    torch::Tensor sq = squares(flat_->grads());
    for (const auto& t : tied_) {
      if (!t.counts_in_norm) sq = sq - squares(flat_->View(flat_->grads(), t.entry));
    }
    sumsq = sq.item<double>();
  }
  // One reduction carries the norm, the loss sums and every rank's timing of this step.
  const int world = world_->size();
  torch::Tensor stats = torch::zeros({4 + kTimingFields * world}, torch::kDouble);
  auto st = stats.accessor<double, 1>();
  st[0] = sumsq;
  if (last_stage()) {
    sums.Settle();  // The step's one wait for the loss sums.
    st[1] = sums.loss;
    st[2] = sums.nll;
    st[3] = static_cast<double>(sums.tokens);
  }
  timing.wait_s += Since(t0);
  timing.step_s = Since(step_start);
  const int base = 4 + kTimingFields * world_->rank();
  st[base + 0] = timing.step_s;
  st[base + 1] = timing.compute_s;
  st[base + 2] = timing.compute_cpu_s;
  st[base + 3] = timing.wait_s;
  st[base + 4] = timing.reduce_wait_s;
  st[base + 5] = timing.peak_live;
  st[base + 6] = timing.schedule_s;
  if (auto s = world_->AllReduceSum(stats); !s.ok()) return s;
  for (int r = 0; r < world; ++r) {
    const int b = 4 + kTimingFields * r;
    RankTiming t;
    t.step_s = st[b], t.compute_s = st[b + 1], t.compute_cpu_s = st[b + 2];
    t.wait_s = st[b + 3], t.reduce_wait_s = st[b + 4], t.peak_live = st[b + 5];
    t.schedule_s = st[b + 6];
    totals.ranks.push_back(t);
  }
  totals.grad_norm = std::sqrt(std::max(0.0, stats[0].item<double>()));
  totals.loss_sum = stats[1].item<double>();
  totals.nll_sum = stats[2].item<double>();
  totals.tgt_tokens = static_cast<int64_t>(std::llround(stats[3].item<double>()));
  totals.src_tokens = static_cast<int64_t>(std::llround(counts[1].item<double>()));
  if (measure_layer_grads_) RecordLayerGradients();  // Before clipping.
  // Clipping is the update's gradient multiplier: no pass over the gradients of its own.
  double clip = 1.0;
  if (options_.clip_norm > 0.0 && totals.grad_norm > options_.clip_norm) {
    clip = options_.clip_norm / (totals.grad_norm + 1e-6);
  }
  compute_->EndStep();  // Before the parameters change.
  optimizer_->Step(lr, clip);
  return totals;
}

absl::Status PipelineEngine::ReduceGradients() {
  absl::Status status;
  for (auto& work : pending_reductions_) {
    if (auto s = work->Wait(); !s.ok() && status.ok()) status = s;
  }
  pending_reductions_.clear();
  for (auto& [bucket, reduced] : reduce_copies_) {
    if (status.ok()) bucket.copy_(reduced.to(options_.grad_reduce_dtype));
  }
  reduce_copies_.clear();
  if (!status.ok()) return status;
  for (auto& t : tied_) {
    torch::Tensor grad = flat_->View(flat_->grads(), t.entry);
    if (auto s = t.group->AllReduceSum(grad); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> PipelineEngine::ForwardOnly(const MicroBatch& batch, int64_t tag_step,
                                                          LossSums* sums, bool want_hidden) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> in;
  if (!first_stage()) {
    auto got = transfer_->Exchange(
        {}, {Expect(stage_ - 1, kActivation, tag_step, 0, batch, compute_->first_layer())},
        Where());
    if (!got.ok()) return got.status();
    in = std::move(got->front());
  }
  torch::Tensor hidden;
  std::vector<torch::Tensor> out;
  try {
    out = compute_->Forward(0, batch, in, 1.0, sums, want_hidden ? &hidden : nullptr);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(Where(), ": ", e.what_without_backtrace()));
  }
  if (!last_stage()) {
    OutgoingMessage message{std::move(out), WorldRank(stage_ + 1, replica_), kActivation, tag_step,
                            0};
    if (auto s = transfer_->Exchange({std::move(message)}, {}, Where()).status(); !s.ok()) {
      return s;
    }
  }
  return hidden;
}

absl::StatusOr<LossSums> PipelineEngine::Evaluate(const std::vector<MicroBatch>& batches) {
  const bool was_training = model_->is_training();
  model_->eval();
  LossSums sums;
  for (const auto& batch : batches) {
    // Negative steps tag forward-only passes, distinct from every training step.
    auto done = ForwardOnly(batch, -(++eval_calls_), &sums, false);
    if (!done.ok()) return done.status();
  }
  model_->train(was_training);
  sums.Settle();
  torch::Tensor stats = torch::zeros({3}, torch::kDouble);
  stats[0] = sums.loss;
  stats[1] = sums.nll;
  stats[2] = static_cast<double>(sums.tokens);
  if (auto s = world_->AllReduceSum(stats); !s.ok()) return s;
  LossSums total;
  total.loss = stats[0].item<double>();
  total.nll = stats[1].item<double>();
  total.tokens = static_cast<int64_t>(std::llround(stats[2].item<double>()));
  return total;
}

absl::StatusOr<double> PipelineEngine::ProbeUpdateNorm(const MicroBatch& probe) {
  auto norms = Probe(probe);
  if (!norms.ok()) return norms.status();
  return norms->update_norm;
}

}  // namespace deepnet::pipeline
