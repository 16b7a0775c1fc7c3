// deploy_lint: parses the files under deploy/ for scripts/check_deploy.sh without needing
// Python's yaml module.
//
//   deploy_lint yaml FILE...   every YAML document of every file parses
//   deploy_lint k8s FILE...    as yaml, and every document is a Kubernetes object: a map with
//                              apiVersion, kind and metadata.name
//   deploy_lint json FILE...   every file is one strict JSON value (RFC 8259)
//
// Prints one line per problem, "FILE: what", and exits 1 when there is any, 2 on bad usage.
// Single-threaded command-line tool.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace {

// Appends the problems of one Kubernetes document (number `index`, from 1) to `problems`.
void CheckKubernetesObject(const YAML::Node& doc, int index, std::vector<std::string>& problems) {
  const std::string where = "document " + std::to_string(index);
  if (doc.IsNull()) return;  // An empty document (a trailing `---`) is allowed.
  if (!doc.IsMap()) {
    problems.push_back(where + ": not a map");
    return;
  }
  for (const char* key : {"apiVersion", "kind"}) {
    if (!doc[key] || !doc[key].IsScalar() || doc[key].Scalar().empty()) {
      problems.push_back(where + ": missing " + key);
    }
  }
  const YAML::Node metadata = doc["metadata"];
  const bool kustomization = doc["kind"] && doc["kind"].IsScalar() &&
                             doc["kind"].Scalar() == "Kustomization";
  if (!kustomization && (!metadata || !metadata.IsMap() || !metadata["name"] ||
                         !metadata["name"].IsScalar() || metadata["name"].Scalar().empty())) {
    problems.push_back(where + ": missing metadata.name");
  }
}

// Problems of one YAML file; `kubernetes` adds the object checks.
std::vector<std::string> CheckYaml(const std::string& path, bool kubernetes) {
  std::vector<std::string> problems;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAllFromFile(path);
  } catch (const YAML::ParserException& e) {
    problems.push_back("YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                       ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
    return problems;
  } catch (const YAML::Exception& e) {
    problems.push_back(std::string("cannot read: ") + e.what());
    return problems;
  }
  if (docs.empty()) problems.push_back("no YAML document");
  if (kubernetes) {
    for (size_t i = 0; i < docs.size(); ++i) {
      CheckKubernetesObject(docs[i], static_cast<int>(i) + 1, problems);
    }
  }
  return problems;
}

std::vector<std::string> CheckJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {"cannot open"};
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json value = nlohmann::json::parse(text.str());
    if (value.is_discarded()) return {"not JSON"};
  } catch (const nlohmann::json::parse_error& e) {
    return {std::string("JSON error: ") + e.what()};
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: deploy_lint yaml|k8s|json FILE...\n";
    return 2;
  }
  const std::string mode = argv[1];
  if (mode != "yaml" && mode != "k8s" && mode != "json") {
    std::cerr << "deploy_lint: unknown mode '" << mode << "' (yaml, k8s or json)\n";
    return 2;
  }
  int failed = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string path = argv[i];
    const std::vector<std::string> problems =
        mode == "json" ? CheckJson(path) : CheckYaml(path, mode == "k8s");
    for (const std::string& problem : problems) std::cout << path << ": " << problem << "\n";
    if (!problems.empty()) ++failed;
  }
  return failed == 0 ? 0 : 1;
}
