#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deepnet::pipeline {

/// Moves every parameter of a module into one contiguous fp32 buffer and every gradient into
/// a second one: each parameter (and its .grad()) becomes a view at a fixed offset. The
/// optimiser, gradient clipping and (later) data-parallel all-reduce then work on a few large
/// tensors instead of thousands of small ones. Parameters keep their global names.
/// Not thread-safe; owned by the training loop.
class FlatParameters {
 public:
  struct Entry {
    std::string name;
    int64_t offset = 0;
    int64_t numel = 0;
    std::vector<int64_t> shape;
  };

  /// Takes over `module`'s parameters (all must be float32 on one device). Values are kept.
  explicit FlatParameters(torch::nn::Module& module);

  torch::Tensor& values() { return values_; }
  torch::Tensor& grads() { return grads_; }
  // 1 for matrices, 0 for vectors (biases, layer-norm gains): which entries weight decay hits.
  const torch::Tensor& decay_mask() const { return decay_mask_; }
  const std::vector<Entry>& entries() const { return entries_; }
  int64_t numel() const { return values_.numel(); }

  // Zeroes the gradient buffer in place (the views stay attached to the parameters).
  void ZeroGrad();
  // A view of `flat` (numel() elements) shaped like entry `i`.
  torch::Tensor View(const torch::Tensor& flat, size_t i) const;

 private:
  std::vector<Entry> entries_;
  torch::Tensor values_;
  torch::Tensor grads_;
  torch::Tensor decay_mask_;
};

}  // namespace deepnet::pipeline
