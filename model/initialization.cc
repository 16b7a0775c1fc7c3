#include "model/initialization.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/init.h>

#include <cmath>
#include <string_view>

namespace deepnet::model {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Layer index from "<stack>.layers.<i>.…", or -1.
int64_t LayerIndex(std::string_view name) {
  const auto pos = name.find(".layers.");
  if (pos == std::string_view::npos) return -1;
  int64_t index = 0;
  size_t i = pos + 8;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) index = index * 10 + (name[i] - '0');
  return index;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t SeedFor(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  return SplitMix64(seed ^ SplitMix64(h));
}

}  // namespace

ParameterInit InitRuleFor(const std::string& name, const DeepNetConfig& config) {
  using Kind = ParameterInit::Kind;
  ParameterInit rule;
  if (EndsWith(name, "embed_tokens.weight") || EndsWith(name, "output_projection.weight")) {
    rule.kind = Kind::kEmbedding;
    return rule;
  }
  const bool is_norm = name.find("layer_norm.") != std::string::npos ||
                       name.find("layernorm.") != std::string::npos ||
                       name.find("inner_attn_ln.") != std::string::npos;
  if (is_norm) {
    rule.kind = EndsWith(name, ".weight") ? Kind::kOnes : Kind::kZeros;
    return rule;
  }
  if (EndsWith(name, ".bias")) return rule;  // zeros
  TORCH_CHECK(EndsWith(name, ".weight"), "no initialisation rule for parameter ", name);

  rule.kind = Kind::kXavierNormal;
  const bool encoder = StartsWith(name, "encoder.");
  const ModelScaling scaling =
      ComputeScaling(config.norm(), config.encoder_layers(), config.decoder_layers());
  const auto& stack = encoder ? scaling.encoder : scaling.decoder;
  TORCH_CHECK(stack.has_value(), "parameter ", name, " belongs to a stack the model lacks");
  const bool scaled = EndsWith(name, "v_proj.weight") || EndsWith(name, "out_proj.weight") ||
                      EndsWith(name, "fc1.weight") || EndsWith(name, "fc2.weight");
  rule.gain = scaled ? stack->beta : 1.0;
  if (config.norm() == NormVariant::kPostLnInit) {
    const int64_t layer = LayerIndex(name);
    TORCH_CHECK(layer >= 0, "cannot find the layer of parameter ", name);
    const int64_t stack_layers = encoder ? config.encoder_layers() : config.decoder_layers();
    rule.divisor = PostLnInitDivisor(layer, stack_layers);
  }
  return rule;
}

void InitializeParameters(DeepNetImpl& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  const auto& config = model.config();
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const ParameterInit rule = InitRuleFor(item.key(), config);
    torch::Tensor param = item.value();
    // Initialise on CPU in float32 with the parameter's own generator, then copy: the values
    // do not depend on the device, the dtype or the order parameters are visited in.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(SeedFor(seed, item.key()));
    torch::Tensor values = torch::empty(param.sizes(), torch::kFloat);
    switch (rule.kind) {
      case ParameterInit::Kind::kXavierNormal: {
        TORCH_CHECK(values.dim() == 2, "Xavier init expects a matrix: ", item.key());
        const double fan_out = static_cast<double>(values.size(0));
        const double fan_in = static_cast<double>(values.size(1));
        const double std = rule.gain * std::sqrt(2.0 / (fan_in + fan_out)) / rule.divisor;
        values.normal_(0.0, std, gen);
        break;
      }
      case ParameterInit::Kind::kEmbedding:
        values.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(config.d_model())), gen);
        if (item.key().find("embed_tokens") != std::string::npos) values[config.pad_id()].zero_();
        break;
      case ParameterInit::Kind::kZeros:
        values.zero_();
        break;
      case ParameterInit::Kind::kOnes:
        values.fill_(1.0);
        break;
    }
    param.copy_(values);
  }
}

}  // namespace deepnet::model
