// The enum names of model/deepnet_config.h. Kept apart from deepnet_config.cc (whose Validate
// uses TORCH_CHECK) so that config parsers build without LibTorch (target deepnet_model_config).
#include "model/deepnet_config.h"

namespace deepnet::model {

std::string_view ToString(NormVariant norm) {
  switch (norm) {
    case NormVariant::kDeepNorm: return "deepnorm";
    case NormVariant::kPostLn: return "post_ln";
    case NormVariant::kPreLn: return "pre_ln";
    case NormVariant::kPostLnInit: return "post_ln_init";
    case NormVariant::kDeepNormPreLn: return "deepnorm_preln";
  }
  return "unknown";
}

std::string_view ToString(Activation activation) {
  return activation == Activation::kRelu ? "relu" : "gelu";
}

std::string_view ToString(InitScheme init) {
  return init == InitScheme::kPaper ? "paper" : "scaled_default";
}

std::string_view ToString(PositionKind positions) {
  return positions == PositionKind::kSinusoidal ? "sinusoidal" : "learned";
}

std::optional<NormVariant> ParseNormVariant(std::string_view name) {
  for (NormVariant v : {NormVariant::kDeepNorm, NormVariant::kPostLn, NormVariant::kPreLn,
                        NormVariant::kPostLnInit, NormVariant::kDeepNormPreLn}) {
    if (ToString(v) == name) return v;
  }
  return std::nullopt;
}

}  // namespace deepnet::model
