#pragma once
// The choices of the job schema as enums, each with its one table of names (job/job_choices.cc).
// The job parser turns a name into its enum once (job/job_schema.cc); everything downstream
// switches on the enum. ToString gives the name as written in job files and dumps.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/deepnet_config.h"

namespace deepnet::job {

enum class DataSource { kSynthetic, kTsv, kShards, kRandomTokens };    // data.source
enum class DataTokenizer { kByte };                                    // data.tokenizer
enum class RandomTokensTarget { kCopy, kReverse };                     // data.random_tokens.target
enum class AttentionChoice { kAuto, kSdpa, kReference };               // runtime.attention
enum class Recompute { kNone, kLayer };                                // runtime.recompute
enum class PrecisionChoice { kAuto, kFp32, kBf16, kTf32 };             // runtime.precision
enum class GradReduce { kFp32, kBf16 };                                // runtime.grad_reduce
enum class Schedule { k1F1B, kGPipe };                                 // parallel.schedule
enum class Backend { kGloo, kMpi, kNccl };                             // parallel.backend
enum class Partition { kFlops, kMeasured };                            // parallel.partition
enum class GuardSwitch { kAuto, kTrue, kFalse };                       // guard.enabled
enum class GuardAction { kRollback, kFail };                           // guard.action
enum class PlateauAction { kNone, kRewarm };                           // guard.plateau_action

/// runtime.device: "cpu", "cuda" (the rank's GPU, picked at start) or "cuda:N".
struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  // N of "cuda:N"; nullopt for "cpu" and a plain "cuda".
  std::optional<int> index;

  bool is_cuda() const { return kind == Kind::kCuda; }
  bool operator==(const Device& other) const {
    return kind == other.kind && index == other.index;
  }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

/// "cpu", "cuda" or "cuda:N".
std::string ToString(const Device& device);
/// The device named `name`; nullopt unless it is cpu, cuda or cuda:N (N decimal, < 2^31).
std::optional<Device> ParseDevice(std::string_view name);

/// One enum's names in schema order, and how an error lists them ("one of a, b" unless the
/// table says otherwise, e.g. "1f1b or gpipe").
template <typename E>
struct ChoiceTable {
  std::vector<std::pair<E, std::string_view>> names;
  std::string_view allowed;  // Empty: "one of " + the names, comma-separated.
};

// The table of each choice (defined in job/job_choices.cc).
const ChoiceTable<DataSource>& ChoicesOf(DataSource);
const ChoiceTable<DataTokenizer>& ChoicesOf(DataTokenizer);
const ChoiceTable<RandomTokensTarget>& ChoicesOf(RandomTokensTarget);
const ChoiceTable<AttentionChoice>& ChoicesOf(AttentionChoice);
const ChoiceTable<Recompute>& ChoicesOf(Recompute);
const ChoiceTable<PrecisionChoice>& ChoicesOf(PrecisionChoice);
const ChoiceTable<GradReduce>& ChoicesOf(GradReduce);
const ChoiceTable<Schedule>& ChoicesOf(Schedule);
const ChoiceTable<Backend>& ChoicesOf(Backend);
const ChoiceTable<Partition>& ChoicesOf(Partition);
const ChoiceTable<GuardSwitch>& ChoicesOf(GuardSwitch);
const ChoiceTable<GuardAction>& ChoicesOf(GuardAction);
const ChoiceTable<PlateauAction>& ChoicesOf(PlateauAction);
// The model's choices, named by model::ToString (model/deepnet_config.h).
const ChoiceTable<model::Activation>& ChoicesOf(model::Activation);
const ChoiceTable<model::NormVariant>& ChoicesOf(model::NormVariant);
const ChoiceTable<model::InitScheme>& ChoicesOf(model::InitScheme);
const ChoiceTable<model::PositionKind>& ChoicesOf(model::PositionKind);

/// The name of `value` as written in job files ("1f1b", "bf16", ...).
template <typename E, typename = decltype(ChoicesOf(E{}))>
std::string ToString(const E& value) {
  for (const auto& [v, name] : ChoicesOf(value).names) {
    if (v == value) return std::string(name);
  }
  return "unknown";
}

/// The enum named `name`, or nullopt.
template <typename E>
std::optional<E> ParseChoice(std::string_view name) {
  for (const auto& [v, n] : ChoicesOf(E{}).names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

/// How an error lists the accepted names: "one of auto, fp32, bf16, tf32" or the table's own
/// phrase ("1f1b or gpipe").
template <typename E>
std::string AllowedChoices() {
  const ChoiceTable<E>& table = ChoicesOf(E{});
  if (!table.allowed.empty()) return std::string(table.allowed);
  std::string text = "one of ";
  for (size_t i = 0; i < table.names.size(); ++i) {
    if (i > 0) text += ", ";
    text += table.names[i].second;
  }
  return text;
}

// gtest and logs print choices by name.
template <typename E, typename = decltype(ChoicesOf(E{}))>
std::ostream& operator<<(std::ostream& out, E value) {
  return out << ToString(value);
}
std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace deepnet::job
