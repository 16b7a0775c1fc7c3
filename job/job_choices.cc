// The names of the job schema's choices (job/job_choices.h), one table each.
#include "job/job_choices.h"

#include <charconv>
#include <initializer_list>
#include <limits>

namespace deepnet::job {

const ChoiceTable<DataSource>& ChoicesOf(DataSource) {
  static const ChoiceTable<DataSource> table{{{DataSource::kSynthetic, "synthetic"},
                                              {DataSource::kTsv, "tsv"},
                                              {DataSource::kShards, "shards"},
                                              {DataSource::kRandomTokens, "random_tokens"}},
                                             {}};
  return table;
}

const ChoiceTable<DataTokenizer>& ChoicesOf(DataTokenizer) {
  static const ChoiceTable<DataTokenizer> table{{{DataTokenizer::kByte, "byte"}}, {}};
  return table;
}

const ChoiceTable<RandomTokensTarget>& ChoicesOf(RandomTokensTarget) {
  static const ChoiceTable<RandomTokensTarget> table{
      {{RandomTokensTarget::kCopy, "copy"}, {RandomTokensTarget::kReverse, "reverse"}}, {}};
  return table;
}

const ChoiceTable<AttentionChoice>& ChoicesOf(AttentionChoice) {
  static const ChoiceTable<AttentionChoice> table{{{AttentionChoice::kAuto, "auto"},
                                                   {AttentionChoice::kSdpa, "sdpa"},
                                                   {AttentionChoice::kReference, "reference"}},
                                                  {}};
  return table;
}

const ChoiceTable<Recompute>& ChoicesOf(Recompute) {
  static const ChoiceTable<Recompute> table{
      {{Recompute::kNone, "none"}, {Recompute::kLayer, "layer"}}, {}};
  return table;
}

const ChoiceTable<PrecisionChoice>& ChoicesOf(PrecisionChoice) {
  static const ChoiceTable<PrecisionChoice> table{{{PrecisionChoice::kAuto, "auto"},
                                                   {PrecisionChoice::kFp32, "fp32"},
                                                   {PrecisionChoice::kBf16, "bf16"},
                                                   {PrecisionChoice::kTf32, "tf32"}},
                                                  {}};
  return table;
}

const ChoiceTable<GradReduce>& ChoicesOf(GradReduce) {
  static const ChoiceTable<GradReduce> table{
      {{GradReduce::kFp32, "fp32"}, {GradReduce::kBf16, "bf16"}}, {}};
  return table;
}

const ChoiceTable<Schedule>& ChoicesOf(Schedule) {
  static const ChoiceTable<Schedule> table{
      {{Schedule::k1F1B, "1f1b"}, {Schedule::kGPipe, "gpipe"}}, "1f1b or gpipe"};
  return table;
}

const ChoiceTable<Backend>& ChoicesOf(Backend) {
  static const ChoiceTable<Backend> table{
      {{Backend::kGloo, "gloo"}, {Backend::kMpi, "mpi"}, {Backend::kNccl, "nccl"}},
      "gloo, mpi or nccl"};
  return table;
}

const ChoiceTable<Partition>& ChoicesOf(Partition) {
  static const ChoiceTable<Partition> table{
      {{Partition::kFlops, "flops"}, {Partition::kMeasured, "measured"}}, "flops or measured"};
  return table;
}

const ChoiceTable<GuardSwitch>& ChoicesOf(GuardSwitch) {
  static const ChoiceTable<GuardSwitch> table{
      {{GuardSwitch::kAuto, "auto"}, {GuardSwitch::kTrue, "true"}, {GuardSwitch::kFalse, "false"}},
      {}};
  return table;
}

const ChoiceTable<GuardAction>& ChoicesOf(GuardAction) {
  static const ChoiceTable<GuardAction> table{
      {{GuardAction::kRollback, "rollback"}, {GuardAction::kFail, "fail"}}, {}};
  return table;
}

const ChoiceTable<PlateauAction>& ChoicesOf(PlateauAction) {
  static const ChoiceTable<PlateauAction> table{
      {{PlateauAction::kNone, "none"}, {PlateauAction::kRewarm, "rewarm"}}, {}};
  return table;
}

namespace {

// A table of model enum values named as model::ToString names them.
template <typename E>
ChoiceTable<E> ModelTable(std::initializer_list<E> values) {
  ChoiceTable<E> table;
  for (E v : values) table.names.emplace_back(v, model::ToString(v));
  return table;
}

}  // namespace

const ChoiceTable<model::Activation>& ChoicesOf(model::Activation) {
  static const ChoiceTable<model::Activation> table =
      ModelTable({model::Activation::kRelu, model::Activation::kGelu});
  return table;
}

const ChoiceTable<model::NormVariant>& ChoicesOf(model::NormVariant) {
  using model::NormVariant;
  static const ChoiceTable<NormVariant> table =
      ModelTable({NormVariant::kDeepNorm, NormVariant::kPostLn, NormVariant::kPreLn,
                  NormVariant::kPostLnInit, NormVariant::kDeepNormPreLn});
  return table;
}

const ChoiceTable<model::InitScheme>& ChoicesOf(model::InitScheme) {
  static const ChoiceTable<model::InitScheme> table =
      ModelTable({model::InitScheme::kPaper, model::InitScheme::kScaledDefault});
  return table;
}

const ChoiceTable<model::PositionKind>& ChoicesOf(model::PositionKind) {
  static const ChoiceTable<model::PositionKind> table =
      ModelTable({model::PositionKind::kSinusoidal, model::PositionKind::kLearned});
  return table;
}

std::string ToString(const Device& device) {
  if (!device.is_cuda()) return "cpu";
  if (!device.index) return "cuda";
  return "cuda:" + std::to_string(*device.index);
}

std::optional<Device> ParseDevice(std::string_view name) {
  if (name == "cpu") return Device{};
  if (name == "cuda") return Device{Device::Kind::kCuda, std::nullopt};
  constexpr std::string_view kPrefix = "cuda:";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(kPrefix.size());
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return std::nullopt;
  }
  int index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return Device{Device::Kind::kCuda, index};
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << ToString(device);
}

}  // namespace deepnet::job
