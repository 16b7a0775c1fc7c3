#include "pipeline/flat_parameters.h"

#include <torch/torch.h>

namespace deepnet::pipeline {

FlatParameters::FlatParameters(torch::nn::Module& module) {
  auto named = module.named_parameters(/*recurse=*/true);
  int64_t total = 0;
  torch::Device device = torch::kCPU;
  for (const auto& item : named) {
    const torch::Tensor& p = item.value();
    TORCH_CHECK(p.scalar_type() == torch::kFloat, "parameter ", item.key(), " is ",
                p.scalar_type(), "; flat parameters need float32");
    if (entries_.empty()) device = p.device();
    TORCH_CHECK(p.device() == device, "parameter ", item.key(), " is on another device");
    entries_.push_back({item.key(), total, p.numel(), p.sizes().vec()});
    total += p.numel();
  }
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  values_ = torch::empty({total}, options);
  grads_ = torch::zeros({total}, options);
  decay_mask_ = torch::zeros({total}, options);
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (const auto& item : named) {
    torch::Tensor p = item.value();
    torch::Tensor value_view = View(values_, i);
    value_view.copy_(p);
    p.set_data(value_view);
    // A defined .grad() makes autograd accumulate in place into the flat buffer.
    p.mutable_grad() = View(grads_, i);
    if (p.dim() >= 2) View(decay_mask_, i).fill_(1.0);
    ++i;
  }
}

void FlatParameters::ZeroGrad() { grads_.zero_(); }

torch::Tensor FlatParameters::View(const torch::Tensor& flat, size_t i) const {
  const Entry& e = entries_.at(i);
  return flat.narrow(0, e.offset, e.numel).view(e.shape);
}

}  // namespace deepnet::pipeline
