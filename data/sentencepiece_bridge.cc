// Loads the SentencePiece module (libdeepnet_spm.so) in its own symbol scope; see
// sentencepiece_bridge.h for why SentencePiece must not be linked into our binaries directly.
#include "data/sentencepiece_bridge.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace deepnet::data::internal {
namespace {

constexpr int kUnavailable = 14;  // absl::StatusCode::kUnavailable
constexpr char kModuleName[] = "libdeepnet_spm.so";

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("DEEPNET_SPM_MODULE"); env != nullptr && *env != '\0') {
    paths.push_back(env);
  }
  // An installed program first (cmake/install.cmake), so that it never loads the module of the
  // build tree it was installed from; build/bin/../lib/deepnet/ does not exist.
  const std::string dir = ExecutableDir();
  paths.push_back(dir + "/../lib/deepnet/" + kModuleName);
#ifdef DEEPNET_SPM_MODULE_PATH
  paths.push_back(DEEPNET_SPM_MODULE_PATH);  // The build tree.
#endif
  paths.push_back(dir + "/" + kModuleName);
  paths.push_back(dir + "/../lib/" + kModuleName);
  paths.push_back(dir + "/../data/" + kModuleName);
  return paths;
}

struct Module {
  const SpmModuleApi* api = nullptr;
  SpmResult error;
};

const Module& LoadModule() {
  static Module module;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : CandidatePaths()) {
      // RTLD_LOCAL keeps SentencePiece's symbols (and its embedded protobuf) out of the global
      // scope; RTLD_DEEPBIND makes the module resolve its own symbols before global ones.
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        tried += "\n  " + path + ": " + dlerror();
        continue;
      }
      using Entry = const SpmModuleApi* (*)();
      auto entry = reinterpret_cast<Entry>(dlsym(handle, "deepnet_spm_module_api"));
      const SpmModuleApi* api = entry != nullptr ? entry() : nullptr;
      if (api == nullptr || api->version != kSpmModuleApiVersion) {
        tried += "\n  " + path + ": not a compatible DeepNet SentencePiece module";
        continue;
      }
      module.api = api;  // Never dlclose'd: processors may live until exit.
      return;
    }
    module.error = {kUnavailable, "cannot load the SentencePiece module " + std::string(kModuleName) +
                                      " (set DEEPNET_SPM_MODULE); tried:" + tried};
  });
  return module;
}

}  // namespace

std::unique_ptr<SpmProcessor> NewSpmProcessor(SpmResult* error) {
  const Module& module = LoadModule();
  if (module.api == nullptr) {
    if (error != nullptr) *error = module.error;
    return nullptr;
  }
  return std::unique_ptr<SpmProcessor>(module.api->new_processor());
}

SpmResult TrainSpm(const std::vector<std::pair<std::string, std::string>>& flags,
                   const std::vector<std::string_view>& sentences, std::string* serialized_model) {
  const Module& module = LoadModule();
  if (module.api == nullptr) return module.error;
  return module.api->train(flags, sentences, serialized_model);
}

}  // namespace deepnet::data::internal
