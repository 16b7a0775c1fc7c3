#pragma once
// The built-in sweeps, `deepnet experiment run --preset NAME`. Their text is that of
// examples/experiments/NAME.yaml, embedded at configure time, so the recipe a researcher copies
// and the preset are one file.

#include <optional>
#include <string>
#include <vector>

namespace deepnet::experiment {

struct Preset {
  std::string name;
  std::string yaml;
};

const std::vector<Preset>& Presets();
std::optional<std::string> PresetYaml(const std::string& name);

}  // namespace deepnet::experiment
