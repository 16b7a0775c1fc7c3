// PipelineEngine's sharded checkpoints: every stage writes its own shard of parameters and
// optimiser state under global names, every rank its RNG states (CPU, and each CUDA device's
// when it trains on CUDA), rank 0 commits one manifest.
// Loading reads tensors by name, so a checkpoint saved at P x D loads at any P' x D'.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_reader.h"
#include "pipeline/pipeline_engine.h"

namespace deepnet::pipeline {
namespace {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

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

// The CUDA generators' states (a CPU tensor each), by device, of every device this process sees;
// none unless it trains on CUDA (asking would start CUDA in a CPU trainer). Device-generic
// ATen calls: no CUDA header needed, and a CPU-only LibTorch never gets here.
std::vector<std::pair<int, torch::Tensor>> CudaGeneratorStates(const torch::Device& device) {
  std::vector<std::pair<int, torch::Tensor>> states;
  if (!device.is_cuda()) return states;
  const int count = static_cast<int>(torch::cuda::device_count());
  for (int d = 0; d < count; ++d) {
    auto gen = at::globalContext().defaultGenerator(
        c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.emplace_back(d, gen.get_state());
  }
  return states;
}

void SetCudaGeneratorState(int device, const torch::Tensor& state) {
  auto gen = at::globalContext().defaultGenerator(
      c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::string ModelShard(int stage) { return absl::StrFormat("model-s%03d.bin", stage); }
std::string OptimizerShard(int stage) { return absl::StrFormat("optimizer-s%03d.bin", stage); }
std::string RankShard(int rank) { return absl::StrFormat("trainer-r%05d.bin", rank); }
std::string RngName(int rank) { return absl::StrCat("rng.cpu.rank", rank); }
std::string CudaRngName(int device, int rank) {
  return absl::StrCat("rng.cuda", device, ".rank", rank);
}

}  // namespace

absl::StatusOr<bool> PipelineEngine::AllOk(bool ok) {
  torch::Tensor failures = torch::full({1}, ok ? 0.0 : 1.0, torch::kDouble);
  if (auto s = world_->AllReduceSum(failures); !s.ok()) return s;
  return failures[0].item<double>() == 0.0;
}

absl::StatusOr<bool> PipelineEngine::AnyRank(bool flag) {
  if (world_->size() == 1) return flag;
  auto all_clear = AllOk(!flag);
  if (!all_clear.ok()) return all_clear.status();
  return !*all_clear;
}

absl::StatusOr<std::string> PipelineEngine::BroadcastString(const std::string& text) {
  torch::Tensor size = torch::full({1}, static_cast<int64_t>(text.size()), torch::kLong);
  if (auto s = world_->Broadcast(size, 0); !s.ok()) return s;
  torch::Tensor bytes = torch::zeros({std::max<int64_t>(1, size[0].item<int64_t>())}, torch::kUInt8);
  if (world_->rank() == 0 && !text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  if (auto s = world_->Broadcast(bytes, 0); !s.ok()) return s;
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr()),
                     static_cast<size_t>(size[0].item<int64_t>()));
}

absl::StatusOr<std::string> PipelineEngine::SaveCheckpoint(checkpoint::CheckpointStore& store,
                                                           int64_t step,
                                                           const nlohmann::json& metadata,
                                                           const NamedTensors& rank0_tensors) {
  const int rank = world_->rank();
  // 1. Rank 0 makes the shared temporary folder; everyone learns its path.
  absl::StatusOr<std::string> tmp = std::string();
  if (rank == 0) tmp = store.PrepareShardedSave(step, run_token_);
  auto ready = AllOk(tmp.ok());
  if (!ready.ok()) return ready.status();
  if (!*ready) {
    return rank == 0 ? tmp.status()
                     : absl::InternalError(absl::StrCat("checkpoint step ", step,
                                                        ": rank 0 could not prepare it"));
  }
  auto path = BroadcastString(*tmp);
  if (!path.ok()) return path.status();

  // 2. Shards. Replica 0 of each stage writes the stage's parameters and moments (a tied table
  // only on its first holder stage, so every name is written once); every rank its RNG state.
  absl::Status wrote = absl::OkStatus();
  if (replica_ == 0) {
    std::set<size_t> skip;
    for (const auto& t : tied_) {
      if (!t.counts_in_norm) skip.insert(t.entry);
    }
    NamedTensors model, optimizer;
    const auto& entries = flat_->entries();
    for (size_t i = 0; i < entries.size(); ++i) {
      if (skip.count(i)) continue;
      model.emplace_back(entries[i].name, flat_->View(flat_->values(), i));
      optimizer.emplace_back("exp_avg." + entries[i].name, flat_->View(optimizer_->exp_avg(), i));
      optimizer.emplace_back("exp_avg_sq." + entries[i].name,
                             flat_->View(optimizer_->exp_avg_sq(), i));
    }
    if (last_stage() && probe_f0_.defined()) model.emplace_back("probe.f0", probe_f0_);
    if (last_stage() && probe_logits0_.defined()) {
      model.emplace_back("probe.logits0", probe_logits0_);
    }
    wrote = checkpoint::CheckpointStore::WriteShard(*path, ModelShard(stage_), model);
    if (wrote.ok()) {
      wrote = checkpoint::CheckpointStore::WriteShard(*path, OptimizerShard(stage_), optimizer);
    }
  }
  if (wrote.ok()) {
    NamedTensors mine{{RngName(rank), CpuGeneratorState()}};
    for (auto& [device, state] : CudaGeneratorStates(options_.device)) {
      mine.emplace_back(CudaRngName(device, rank), std::move(state));
    }
    if (rank == 0) mine.insert(mine.end(), rank0_tensors.begin(), rank0_tensors.end());
    wrote = checkpoint::CheckpointStore::WriteShard(*path, RankShard(rank), mine);
  }
  auto written = AllOk(wrote.ok());
  if (!written.ok()) return written.status();
  if (!*written) {
    return !wrote.ok() ? store.ExplainSaveFailure(wrote)
                       : absl::InternalError(absl::StrCat(
                             "checkpoint step ", step, ": another rank failed to write its shard"));
  }

  // 3. Rank 0 commits: manifest, rename, `latest`.
  absl::StatusOr<std::string> committed = std::string();
  if (rank == 0) {
    std::vector<std::string> shards;
    for (int s = 0; s < options_.stages; ++s) {
      shards.push_back(ModelShard(s));
      shards.push_back(OptimizerShard(s));
    }
    for (int r = 0; r < world_->size(); ++r) shards.push_back(RankShard(r));
    nlohmann::json meta = metadata;
    meta["optimizer_steps"] = optimizer_->step_count();
    meta["layout"] = {{"pipeline_stages", options_.stages},
                      {"data_parallel", options_.replicas},
                      {"schedule", ToString(options_.schedule)}};
    committed = store.CommitShardedSave(*path, step, meta, shards);
  }
  auto done = AllOk(committed.ok());
  if (!done.ok()) return done.status();
  if (!*done) {
    return rank == 0 ? committed.status()
                     : absl::InternalError(absl::StrCat("checkpoint step ", step,
                                                        ": rank 0 could not commit it"));
  }
  return BroadcastString(*committed);
}

absl::StatusOr<ResumePoint> PipelineEngine::Resume(
    const checkpoint::CheckpointStore& store,
    const std::function<absl::Status(const nlohmann::json&)>& check,
    std::vector<std::string>* rejected) {
  // Rank 0's view of the folder decides the candidates: the one `latest` names, then older ones
  // newest first (the order the coordinator announces the resume step by).
  std::string listing;
  if (world_->rank() == 0) {
    for (const auto& info : store.ResumeOrder()) listing += info.path + "\n";
  }
  auto shared = BroadcastString(listing);
  if (!shared.ok()) return shared.status();
  std::vector<std::string> candidates = absl::StrSplit(*shared, '\n', absl::SkipEmpty());
  const auto& entries = flat_->entries();
  for (const std::string& path : candidates) {
    absl::Status status = absl::OkStatus();
    ResumePoint point;
    std::vector<torch::Tensor> values(entries.size());
    NamedTensors moments;
    torch::Tensor rng, f0, logits0;
    std::vector<std::pair<int, torch::Tensor>> cuda_rng;
    auto reader = checkpoint::CheckpointReader::Open(path);
    if (!reader.ok()) status = reader.status();
    if (status.ok()) {
      point.step = (*reader)->step();
      point.metadata = (*reader)->metadata();
      point.path = path;
      // A checkpoint of another model is a configuration error, not a reason to fall back.
      if (auto s = check(point.metadata); !s.ok()) return s;
      const auto& layout = point.metadata.value("layout", nlohmann::json::object());
      point.same_layout = layout.value("pipeline_stages", int64_t{0}) == options_.stages &&
                          layout.value("data_parallel", int64_t{0}) == options_.replicas;
    }
    for (size_t i = 0; status.ok() && i < entries.size(); ++i) {
      const std::string& name = entries[i].name;
      auto value = (*reader)->Read(name);
      if (!value.ok()) {
        status = value.status();
        break;
      }
      if (value->sizes() != c10::IntArrayRef(entries[i].shape)) {
        status = absl::DataLossError(absl::StrCat(path, ": ", name, " has shape ",
                                                  c10::str(value->sizes())));
        break;
      }
      values[i] = *std::move(value);
      for (const char* prefix : {"exp_avg.", "exp_avg_sq."}) {
        auto moment = (*reader)->Read(prefix + name);
        if (!moment.ok()) {
          status = moment.status();
          break;
        }
        moments.emplace_back(prefix + name, *std::move(moment));
      }
    }
    if (status.ok() && last_stage() && (*reader)->Has("probe.f0")) {
      auto value = (*reader)->Read("probe.f0");
      if (value.ok()) f0 = *std::move(value);
      else status = value.status();
    }
    if (status.ok() && last_stage() && (*reader)->Has("probe.logits0")) {
      auto value = (*reader)->Read("probe.logits0");
      if (value.ok()) {
        logits0 = *std::move(value);
      } else {
        status = value.status();
      }
    }
    if (status.ok() && point.same_layout) {
      auto value = (*reader)->Read(RngName(world_->rank()));
      if (value.ok()) rng = *std::move(value);
      else status = value.status();
      // CUDA generators of the devices this rank sees and the checkpoint has (older
      // checkpoints and CPU runs have none: then the generators keep their seeds).
      const int devices =
          options_.device.is_cuda() ? static_cast<int>(torch::cuda::device_count()) : 0;
      for (int d = 0; status.ok() && d < devices; ++d) {
        const std::string name = CudaRngName(d, world_->rank());
        if (!(*reader)->Has(name)) continue;
        auto state = (*reader)->Read(name);
        if (!state.ok()) {
          status = state.status();
          break;
        }
        cuda_rng.emplace_back(d, *std::move(state));
      }
    }
    auto everyone = AllOk(status.ok());
    if (!everyone.ok()) return everyone.status();
    if (!*everyone) {
      if (rejected != nullptr) {
        rejected->push_back(status.ok() ? absl::StrCat(path, ": rejected by another rank")
                                        : std::string(status.message()));
      }
      continue;
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < entries.size(); ++i) flat_->View(flat_->values(), i).copy_(values[i]);
    if (auto s = optimizer_->ImportState(moments, point.metadata.at("optimizer_steps").get<int64_t>());
        !s.ok()) {
      return s;
    }
    if (f0.defined()) {
      probe_f0_ = f0.to(options_.device);
      probe_logits0_ = logits0.defined() ? logits0.cpu() : torch::Tensor();  // Host memory.
      probe_reference_ = true;
    }
    // Other replicas and stages know the reference exists once any stage saved it.
    auto any_f0 = AllOk(!f0.defined());
    if (!any_f0.ok()) return any_f0.status();
    if (!*any_f0) probe_reference_ = true;
    if (rng.defined()) SetCpuGeneratorState(rng);
    for (const auto& [device, state] : cuda_rng) SetCudaGeneratorState(device, state);
    return point;
  }
  return absl::NotFoundError("no checkpoint to resume from in " + store.dir());
}

}  // namespace deepnet::pipeline
