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

// v_proj, out_proj, fc1 and fc2 (weights and biases) get DeepNorm's beta.
bool BetaScaled(std::string_view name) {
  for (std::string_view part : {"v_proj.", "out_proj.", "fc1.", "fc2."}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

double InitStd(const ParameterInit& rule, int64_t fan_out, int64_t fan_in, int64_t d_model) {
  using Kind = ParameterInit::Kind;
  switch (rule.kind) {
    case Kind::kXavierNormal:
      return rule.gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)) / rule.divisor;
    case Kind::kUniform:
      return rule.bound * rule.gain / rule.divisor / std::sqrt(3.0);
    case Kind::kEmbedding:
      return 1.0 / std::sqrt(static_cast<double>(d_model));
    case Kind::kZeros:
    case Kind::kOnes:
      return 0.0;
  }
  return 0.0;
}

ParameterInit InitRuleFor(const std::string& name, const DeepNetConfig& config) {
  using Kind = ParameterInit::Kind;
  ParameterInit rule;
  if (EndsWith(name, "embed_tokens.weight") || EndsWith(name, "output_projection.weight") ||
      EndsWith(name, "embed_positions.weight")) {
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
  const bool scaled_default = config.init() == InitScheme::kScaledDefault;
  const bool bias = EndsWith(name, ".bias");
  if (bias && !scaled_default) return rule;  // zeros
  TORCH_CHECK(bias || EndsWith(name, ".weight"), "no initialisation rule for parameter ", name);

  const bool encoder = StartsWith(name, "encoder.");
  const ModelScaling scaling =
      ComputeScaling(config.norm(), config.encoder_layers(), config.decoder_layers());
  const auto& stack = encoder ? scaling.encoder : scaling.decoder;
  TORCH_CHECK(stack.has_value(), "parameter ", name, " belongs to a stack the model lacks");
  rule.gain = BetaScaled(name) ? stack->beta : 1.0;
  if (scaled_default) {
    // nn.Linear's reset: kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in)) for the weight,
    // the same bound for the bias. Only fc2 reads ffn_dim inputs.
    rule.kind = Kind::kUniform;
    const bool ffn_input = name.find("fc2.") != std::string::npos;
    const int64_t fan_in = ffn_input ? config.ffn_dim() : config.d_model();
    rule.bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    if (bias) return rule;  // post_ln_init's k_l divides weights only.
  } else {
    rule.kind = Kind::kXavierNormal;
  }
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
        values.normal_(0.0, InitStd(rule, values.size(0), values.size(1), config.d_model()), gen);
        break;
      }
      case ParameterInit::Kind::kUniform: {
        const double bound = rule.bound * rule.gain / rule.divisor;
        values.uniform_(-bound, bound, gen);
        break;
      }
      case ParameterInit::Kind::kEmbedding:
        values.normal_(0.0, InitStd(rule, 0, 0, config.d_model()), gen);
        // Position tables are indexed by position, not token: no padding row.
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
