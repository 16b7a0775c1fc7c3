// DumpJobConfig: the effective job configuration as YAML (job/job_config.h), every key the
// schema declares (job/job_schema.h) in its order.
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "job/job_config.h"
#include "job/job_schema.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

// Writes each key the schema visits; numbers keep their type (a real always shows a point).
class SchemaEmitter {
 public:
  explicit SchemaEmitter(YAML::Emitter& out) : out_(out) {}

  void Int(const char* key, const int64_t& v, IntBounds) { Put(key, v); }
  void Uint(const char* key, const uint64_t& v) { Put(key, v); }
  void Real(const char* key, const double& v, RealBounds) { Put(key, FormatDouble(v)); }
  void Bool(const char* key, const bool& v) { Put(key, v); }
  void String(const char* key, const std::string& v, Omit omit) {
    if (omit == Omit::kWhenEmpty && v.empty()) return;
    Put(key, v);
  }
  void Path(const char* key, const std::string& v, JobPathUse) { Put(key, v); }
  void StringList(const char* key, const std::vector<std::string>& v) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << v;
  }
  void StringMap(const char* key, const std::map<std::string, std::string>& v) {
    out_ << YAML::Key << key << YAML::Value;
    if (v.empty()) out_ << YAML::Flow;  // "labels: {}" rather than a lone "{}" line.
    out_ << YAML::BeginMap;
    for (const auto& [k, value] : v) out_ << YAML::Key << k << YAML::Value << value;
    out_ << YAML::EndMap;
  }
  void RealPair(const char* key, const double& first, const double& second) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq << FormatDouble(first)
         << FormatDouble(second) << YAML::EndSeq;
  }
  template <typename E>
  void Choice(const char* key, const E& v) {
    Put(key, std::string(ToString(v)));  // model::ToString gives a string_view.
  }
  void Device(const char* key, const job::Device& v) { Put(key, ToString(v)); }
  template <typename Fn>
  void Section(const char* key, Fn visit) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    visit(*this);
    out_ << YAML::EndMap;
  }
  void Forbid(const char*, const std::string&) {}

 private:
  template <typename T>
  void Put(const char* key, const T& v) {
    out_ << YAML::Key << key << YAML::Value << v;
  }

  YAML::Emitter& out_;
};

}  // namespace

std::string DumpJobConfig(const JobConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  SchemaEmitter emitter(out);
  VisitJob(c, emitter);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace deepnet::job
