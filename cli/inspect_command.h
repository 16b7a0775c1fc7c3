#pragma once

#include <string>

#include "model/deepnet_config.h"
#include "model/model_stats.h"

namespace deepnet::cli {

/// `deepnet inspect` output for a shape: alpha/beta per stack, parameter counts, training
/// FLOPs per token and memory for parameters, gradients and Adam state. Nothing is allocated.
/// JSON keys include encoder.alpha, encoder.beta, decoder.alpha, decoder.beta (null where a
/// stack is absent) and parameters.
std::string InspectJson(const model::DeepNetConfig& config, const model::StatsOptions& options);
std::string InspectText(const model::DeepNetConfig& config, const model::StatsOptions& options);

}  // namespace deepnet::cli
