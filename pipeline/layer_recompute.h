#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace deepnet::pipeline {

/// A layer as recomputation sees it: a pure function of its differentiable inputs (anything
/// else it needs, such as padding masks, captured), drawing dropout from the default generators.
using RecomputableLayer = std::function<torch::Tensor(const std::vector<torch::Tensor>& inputs)>;

/// Runs `layer` on `inputs` as one autograd node that keeps only its inputs (`runtime.recompute:
/// layer`): the forward runs without autograd, so the layer's activations are freed at once; the
/// backward restores the generator states the forward started from (the default CPU generator,
/// and the CUDA generator of the inputs' device), runs `layer` again with autograd, puts the
/// generators back as they were, and back-propagates through that graph. Dropout masks are so
/// drawn again exactly, and the parameters' gradients accumulate exactly as in a plain backward
/// (bit-identical in float32 on the CPU). The inputs must not change in place before backward
/// (checked). With autograd off this is just `layer(inputs)`.
torch::Tensor RunRecomputed(const std::vector<torch::Tensor>& inputs, RecomputableLayer layer);

}  // namespace deepnet::pipeline
