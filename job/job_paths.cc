#include "job/job_paths.h"

#include <map>
#include <utility>

#include "absl/strings/str_join.h"

namespace deepnet::job {

namespace {

// Collects the keys the schema declares with Path; ignores every other kind.
class PathCollector {
 public:
  std::vector<JobPath> paths;

  void Path(const char* key, const std::string& value, JobPathUse use) {
    if (value.empty()) return;
    std::vector<std::string> parts = prefix_;
    parts.emplace_back(key);
    paths.push_back({absl::StrJoin(parts, "."), value, use});
  }
  template <typename Fn>
  void Section(const char* key, Fn visit) {
    prefix_.emplace_back(key);
    visit(*this);
    prefix_.pop_back();
  }
  template <typename... Ignored>
  void Int(Ignored&&...) {}
  template <typename... Ignored>
  void Uint(Ignored&&...) {}
  template <typename... Ignored>
  void Real(Ignored&&...) {}
  template <typename... Ignored>
  void Bool(Ignored&&...) {}
  template <typename... Ignored>
  void String(Ignored&&...) {}
  template <typename... Ignored>
  void StringList(Ignored&&...) {}
  template <typename... Ignored>
  void StringMap(Ignored&&...) {}
  template <typename... Ignored>
  void RealPair(Ignored&&...) {}
  template <typename... Ignored>
  void Choice(Ignored&&...) {}
  template <typename... Ignored>
  void Device(Ignored&&...) {}
  template <typename... Ignored>
  void Forbid(Ignored&&...) {}

 private:
  std::vector<std::string> prefix_;
};

}  // namespace

std::vector<JobPath> JobPaths(const JobConfig& config) {
  PathCollector collector;
  VisitJob(config, collector);
  return std::move(collector.paths);
}

}  // namespace deepnet::job
