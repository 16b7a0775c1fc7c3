#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "profiling/op_kinds.h"

namespace deepnet::profiling {

/// One op as the trace shows it (host times: when it was dispatched and returned).
struct TraceEvent {
  std::string name;
  OpKind kind = OpKind::kOther;
  uint64_t thread = 0;
  double start_us = 0.0;  // Since the census started.
  double duration_us = 0.0;
  int depth = 0;  // 0: top level.
};

/// What ran between OpCensus's start and Stop(): device-independent figures of a training step
/// that CI can hold to a budget (docs/PERFORMANCE.md "Op census").
struct CensusResult {
  int64_t ops = 0;            // Every ATen op dispatched, nested ones included.
  int64_t top_level_ops = 0;  // Ops not nested in another op: what the model code, the engine
                              // and autograd's nodes asked for.
  int64_t autograd_nodes = 0;
  PerKind<int64_t> calls_by_kind{};  // Top-level ops.
  PerKind<double> host_s_by_kind{};  // Host time of top-level ops.
  std::map<std::string, int64_t> calls_by_op;  // Top-level ops by name.
  int64_t allocations = 0;      // Host (CPU allocator) allocations, and their bytes:
  int64_t allocated_bytes = 0;  // the temporaries a step creates.
  int64_t peak_live_bytes = 0;  // Highest bytes allocated and not freed, from the start.
  double wall_s = 0.0;
  std::vector<TraceEvent> events;  // With Options::trace only.
};

/// Counts the ATen ops dispatched and the CPU allocator's allocations while it lives, through
/// LibTorch's RecordFunction callbacks and its memory-reporting hook (both on every LibTorch
/// version the project supports). One census at a time in a process; start and stop it on one
/// thread. It takes the allocator's reporting slot that LibTorch's own profiler uses: do not run
/// both at once. Ops of every thread are counted; allocations of the starting thread and the
/// threads LibTorch hands its state to (autograd, intra-op workers).
class OpCensus {
 public:
  struct Options {
    bool trace = false;   // Keep every op as a TraceEvent (for a Chrome trace).
    bool memory = true;   // Count allocations.
  };
  explicit OpCensus(Options options);
  OpCensus() : OpCensus(Options()) {}
  ~OpCensus();
  OpCensus(const OpCensus&) = delete;
  OpCensus& operator=(const OpCensus&) = delete;

  // Stops counting and returns what ran. Only the first call counts.
  CensusResult Stop();

  struct State;  // What the callbacks add to (op_census.cc).

 private:
  struct MemoryGuard;
  std::shared_ptr<State> state_;
  std::unique_ptr<MemoryGuard> memory_;
  uint64_t callback_ = 0;
  bool stopped_ = false;
};

/// `result` minus `base`, per field (events dropped): the cost of what one run did beyond the
/// other, e.g. two layers' step minus one layer's.
CensusResult Difference(const CensusResult& result, const CensusResult& base);

/// A table: ops (and with `times`, host time) per kind, allocations, the `top` most frequent
/// ops. Leave times out for a Difference: times of two runs do not subtract meaningfully.
std::string FormatCensus(const CensusResult& result, int top = 12, bool times = true);

/// Chrome's trace format (chrome://tracing, Perfetto): one complete event per op.
std::string ChromeTrace(const std::vector<TraceEvent>& events);

}  // namespace deepnet::profiling
