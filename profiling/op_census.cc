#include "profiling/op_census.h"

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string_view>
#include <utility>

namespace deepnet::profiling {
namespace {

using Clock = std::chrono::steady_clock;

// The argument types of MemoryReportingInfoBase::reportMemoryUsage, read from the base class:
// the totals are int64_t on LibTorch 1.13 and size_t on later versions.
template <typename F>
struct ReportArgs;
template <typename C, typename R, typename A1, typename A2, typename A3, typename A4, typename A5>
struct ReportArgs<R (C::*)(A1, A2, A3, A4, A5)> {
  using Total = A3;
  using Reserved = A4;
};
using ReportTypes = ReportArgs<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Per thread: how deep in ATen ops the thread is, and the step's user scopes it is inside.
thread_local int t_depth = 0;
thread_local std::vector<OpKind> t_scope_kinds;

}  // namespace

struct OpCensus::State {
  Options options;
  Clock::time_point start = Clock::now();
  std::mutex mu;
  CensusResult result;  // Guarded by mu.
};

namespace {

std::atomic<OpCensus::State*>& Active() {
  static std::atomic<OpCensus::State*> active{nullptr};
  return active;
}

struct OpContext : at::ObserverContext {
  OpCensus::State* state = nullptr;
  Clock::time_point start;
  int depth = 0;
  bool user_scope = false;
  bool autograd_node = false;
  bool container = false;  // The autograd engine's wrapper around a node: not an op.
};

// A user scope named deepnet::optimizer... or deepnet::collective... gives its ops a kind.
OpKind ScopeKind(std::string_view name) {
  if (StartsWith(name, "deepnet::optimizer")) return OpKind::kOptimizer;
  if (StartsWith(name, "deepnet::collective")) return OpKind::kCommunication;
  return OpKind::kOther;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  OpCensus::State* state = Active().load(std::memory_order_acquire);
  if (state == nullptr) return nullptr;
  auto ctx = std::make_unique<OpContext>();
  ctx->state = state;
  ctx->start = Clock::now();
  switch (fn.scope()) {
    case at::RecordScope::USER_SCOPE:
      ctx->user_scope = true;
      t_scope_kinds.push_back(ScopeKind(fn.name()));
      break;
    case at::RecordScope::BACKWARD_FUNCTION:
      ctx->autograd_node = true;
      break;
    default:
      // The engine wraps each node it runs in "autograd::engine::evaluate_function: <node>";
      // the node's own ops count as top level, as the forward's do.
      if (StartsWith(fn.name(), "autograd::engine::")) {
        ctx->container = true;
      } else {
        ctx->depth = t_depth++;
      }
      break;
  }
  return ctx;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* base) {
  auto* ctx = static_cast<OpContext*>(base);
  if (ctx == nullptr || ctx->state == nullptr) return;
  const auto end = Clock::now();
  OpCensus::State& s = *ctx->state;
  if (ctx->container) return;
  if (ctx->user_scope) {
    if (!t_scope_kinds.empty()) t_scope_kinds.pop_back();
    return;
  }
  if (ctx->autograd_node) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.result.autograd_nodes;
    return;
  }
  --t_depth;
  const std::string_view name = fn.name();
  OpKind kind = KindOfOp(name);
  for (auto it = t_scope_kinds.rbegin(); it != t_scope_kinds.rend(); ++it) {
    if (*it != OpKind::kOther) {
      kind = *it;
      break;
    }
  }
  const double seconds = std::chrono::duration<double>(end - ctx->start).count();
  std::lock_guard<std::mutex> lock(s.mu);
  CensusResult& r = s.result;
  ++r.ops;
  if (ctx->depth == 0) {
    ++r.top_level_ops;
    r.calls_by_kind[static_cast<int>(kind)] += 1;
    r.host_s_by_kind[static_cast<int>(kind)] += seconds;
    ++r.calls_by_op[std::string(name)];
  }
  if (s.options.trace) {
    TraceEvent e;
    e.name = std::string(name);
    e.kind = kind;
    e.thread = fn.threadId();
    e.start_us = std::chrono::duration<double, std::micro>(ctx->start - s.start).count();
    e.duration_us = seconds * 1e6;
    e.depth = ctx->depth;
    r.events.push_back(std::move(e));
  }
}

// The CPU allocator reports each allocation (size > 0) and free (size < 0) here while this is
// the thread's PROFILER_STATE debug info.
class MemoryTally : public c10::MemoryReportingInfoBase {
 public:
  explicit MemoryTally(OpCensus::State* state) : state_(state) {}

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, ReportTypes::Total /*allocated*/,
                         ReportTypes::Reserved /*reserved*/, c10::Device device) override {
    if (!device.is_cpu()) return;
    std::lock_guard<std::mutex> lock(state_->mu);
    CensusResult& r = state_->result;
    live_ += alloc_size;
    if (alloc_size > 0) {
      ++r.allocations;
      r.allocated_bytes += alloc_size;
      r.peak_live_bytes = std::max(r.peak_live_bytes, live_);
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  OpCensus::State* state_;
  int64_t live_ = 0;  // Guarded by state_->mu.
};

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

}  // namespace

struct OpCensus::MemoryGuard {
  explicit MemoryGuard(std::shared_ptr<MemoryTally> tally)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::move(tally)) {}
  c10::DebugInfoGuard guard;
};

OpCensus::OpCensus(Options options) : state_(std::make_shared<State>()) {
  state_->options = options;
  TORCH_CHECK(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr ||
                  !options.memory,
              "OpCensus: LibTorch's profiler is running on this thread (it reports memory to "
              "the same slot)");
  State* expected = nullptr;
  TORCH_CHECK(Active().compare_exchange_strong(expected, state_.get()),
              "OpCensus: another census is running in this process");
  if (options.memory) memory_ = std::make_unique<MemoryGuard>(std::make_shared<MemoryTally>(state_.get()));
  callback_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&OnStart, &OnEnd)
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
  state_->start = Clock::now();
}

OpCensus::~OpCensus() { Stop(); }

CensusResult OpCensus::Stop() {
  if (stopped_) return {};
  stopped_ = true;
  at::removeCallback(callback_);
  memory_.reset();
  Active().store(nullptr, std::memory_order_release);
  std::lock_guard<std::mutex> lock(state_->mu);
  CensusResult r = std::move(state_->result);
  r.wall_s = std::chrono::duration<double>(Clock::now() - state_->start).count();
  state_->result = CensusResult();
  return r;
}

CensusResult Difference(const CensusResult& a, const CensusResult& b) {
  CensusResult d;
  d.ops = a.ops - b.ops;
  d.top_level_ops = a.top_level_ops - b.top_level_ops;
  d.autograd_nodes = a.autograd_nodes - b.autograd_nodes;
  for (int k = 0; k < kOpKinds; ++k) {
    d.calls_by_kind[k] = a.calls_by_kind[k] - b.calls_by_kind[k];
    d.host_s_by_kind[k] = a.host_s_by_kind[k] - b.host_s_by_kind[k];
  }
  d.calls_by_op = a.calls_by_op;
  for (const auto& [name, n] : b.calls_by_op) d.calls_by_op[name] -= n;
  for (auto it = d.calls_by_op.begin(); it != d.calls_by_op.end();) {
    it = it->second == 0 ? d.calls_by_op.erase(it) : std::next(it);
  }
  d.allocations = a.allocations - b.allocations;
  d.allocated_bytes = a.allocated_bytes - b.allocated_bytes;
  d.peak_live_bytes = a.peak_live_bytes - b.peak_live_bytes;
  d.wall_s = a.wall_s - b.wall_s;
  return d;
}

std::string FormatCensus(const CensusResult& r, int top, bool times) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "ops %lld (top level %lld), autograd nodes %lld, allocations %lld (%.3f MiB, "
                "peak live %.3f MiB)",
                static_cast<long long>(r.ops), static_cast<long long>(r.top_level_ops),
                static_cast<long long>(r.autograd_nodes), static_cast<long long>(r.allocations),
                r.allocated_bytes / 1048576.0, r.peak_live_bytes / 1048576.0);
  out << line;
  if (times) {
    std::snprintf(line, sizeof(line), ", wall %.3f ms", 1e3 * r.wall_s);
    out << line;
  }
  out << "\n";
  double host = 0.0;
  for (double s : r.host_s_by_kind) host += s;
  for (int k = 0; k < kOpKinds; ++k) {
    if (r.calls_by_kind[k] == 0) continue;
    const std::string kind(ToString(static_cast<OpKind>(k)));
    if (times) {
      std::snprintf(line, sizeof(line), "  %-14s %8lld ops  %9.3f ms host  %5.1f%%\n",
                    kind.c_str(), static_cast<long long>(r.calls_by_kind[k]),
                    1e3 * r.host_s_by_kind[k], host > 0 ? 100.0 * r.host_s_by_kind[k] / host : 0.0);
    } else {
      std::snprintf(line, sizeof(line), "  %-14s %8lld ops\n", kind.c_str(),
                    static_cast<long long>(r.calls_by_kind[k]));
    }
    out << line;
  }
  std::vector<std::pair<int64_t, std::string>> ops;
  for (const auto& [name, n] : r.calls_by_op) ops.emplace_back(n, name);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (top > 0 && !ops.empty()) out << "  most frequent:";
  for (int i = 0; i < top && i < static_cast<int>(ops.size()); ++i) {
    out << (i ? ", " : " ") << ops[i].second << " " << ops[i].first;
  }
  if (top > 0 && !ops.empty()) out << "\n";
  return out.str();
}

std::string ChromeTrace(const std::vector<TraceEvent>& events) {
  std::ostringstream out;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  char buf[128];
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    std::snprintf(buf, sizeof(buf), "\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%llu", e.start_us,
                  e.duration_us, static_cast<unsigned long long>(e.thread));
    out << (i ? ",\n" : "\n") << "{\"name\":\"" << Escape(e.name) << "\",\"cat\":\""
        << ToString(e.kind) << "\",\"ph\":\"X\"," << buf << ",\"args\":{\"depth\":" << e.depth
        << "}}";
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace deepnet::profiling
