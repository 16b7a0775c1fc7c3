#include "pipeline/layer_recompute.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace deepnet::pipeline {
namespace {

using torch::autograd::variable_list;

// Autocast's weight-cast cache off for the scope's life (restored on exit, also on a throw):
// casts made while recomputing must not outlive the call (see RunRecomputed and apply()).
class NoAutocastCache {
 public:
  NoAutocastCache() : was_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~NoAutocastCache() { at::autocast::set_autocast_cache_enabled(was_); }
  NoAutocastCache(const NoAutocastCache&) = delete;
  NoAutocastCache& operator=(const NoAutocastCache&) = delete;

 private:
  bool was_;
};

// States of the generators a layer's dropout draws from: LibTorch's default CPU generator
// (ATen's dropout on CPU, model/kernels/dropout_mask.h) and, for a CUDA layer, the default
// generator of its device (ATen's dropout and SDPA's on CUDA).
class GeneratorStates {
 public:
  static GeneratorStates Capture(const torch::Device& device) {
    GeneratorStates s;
    s.cpu_ = Get(at::globalContext().defaultGenerator(torch::kCPU));
    if (device.is_cuda()) {
      s.device_ = device;
      s.device_state_ = Get(at::globalContext().defaultGenerator(device));
    }
    return s;
  }
  void Restore() const {
    Set(at::globalContext().defaultGenerator(torch::kCPU), cpu_);
    if (device_state_.defined()) Set(at::globalContext().defaultGenerator(device_), device_state_);
  }

 private:
  static torch::Tensor Get(const at::Generator& generator) {
    at::Generator g = generator;
    std::lock_guard<std::mutex> lock(g.mutex());
    return g.get_state();
  }
  static void Set(const at::Generator& generator, const torch::Tensor& state) {
    at::Generator g = generator;
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  }

  torch::Tensor cpu_;
  torch::Device device_ = torch::kCPU;
  torch::Tensor device_state_;
};

// The backward node of RunRecomputed: holds the inputs (data only), which of them need a
// gradient, the layer and the generator states.
class RecomputedLayerBackward : public torch::autograd::Node {
 public:
  RecomputedLayerBackward(std::vector<torch::Tensor> inputs, std::vector<bool> needs_grad,
                          RecomputableLayer layer, GeneratorStates generators)
      : inputs_(std::move(inputs)),
        needs_grad_(std::move(needs_grad)),
        layer_(std::move(layer)),
        generators_(std::move(generators)) {
    for (const auto& t : inputs_) versions_.push_back(t._version());
  }

  std::string name() const override { return "RecomputedLayerBackward"; }

  void release_variables() override {
    inputs_.clear();
    layer_ = nullptr;
  }

  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(layer_ != nullptr,
                "recomputed layer: backward ran twice (its inputs are freed after the first)");
    variable_list result(inputs_.size());
    if (grads.empty() || !grads[0].defined()) return result;
    std::vector<torch::Tensor> leaves;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      TORCH_CHECK(inputs_[i]._version() == versions_[i], "recomputed layer: input ", i,
                  " was modified in place after the forward");
      leaves.push_back(inputs_[i].detach().requires_grad_(needs_grad_[i]));
    }
    torch::Tensor out;
    {
      // The forward's dropout masks again, then the generators as this backward found them.
      const torch::Device device =
          inputs_.empty() ? torch::Device(torch::kCPU) : inputs_[0].device();
      const GeneratorStates now = GeneratorStates::Capture(device);
      generators_.Restore();
      torch::AutoGradMode grad_mode(true);
      // Backward may run on an autograd device thread (CUDA), whose autocast cache nothing
      // clears between steps: weight casts made here must not outlive this call.
      {
        NoAutocastCache no_cache;
        out = layer_(leaves);
      }
      now.Restore();
    }
    if (!out.requires_grad()) return result;
    // Parameters' gradients accumulate here; the inputs' come back to the outer graph.
    torch::autograd::backward({out}, {grads[0]});
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (needs_grad_[i]) result[i] = leaves[i].grad();
    }
    return result;
  }

 private:
  std::vector<torch::Tensor> inputs_;
  std::vector<int64_t> versions_;
  std::vector<bool> needs_grad_;
  RecomputableLayer layer_;
  GeneratorStates generators_;
};

}  // namespace

torch::Tensor RunRecomputed(const std::vector<torch::Tensor>& inputs, RecomputableLayer layer) {
  if (!torch::GradMode::is_enabled()) return layer(inputs);
  TORCH_CHECK(!inputs.empty() && inputs[0].defined(), "recomputed layer: no input");
  GeneratorStates generators = GeneratorStates::Capture(inputs[0].device());
  torch::Tensor out;
  {
    torch::NoGradGuard no_grad;
    // Under autocast (the step's precision), casts of weights made here have no autograd
    // history: keep them out of autocast's weight cache, where the recomputation would find
    // them. Autocast itself stays as the caller set it.
    {
      NoAutocastCache no_cache;
      out = layer(inputs);
    }
    if (out.is_view()) out = out.clone();  // The node's output must own its storage.
  }
  std::vector<torch::Tensor> kept;
  std::vector<bool> needs_grad;
  torch::autograd::edge_list edges;
  for (const auto& t : inputs) {
    const bool grad = t.defined() && t.requires_grad();
    kept.push_back(t.defined() ? t.detach() : t);
    needs_grad.push_back(grad);
    edges.push_back(grad ? torch::autograd::impl::gradient_edge(t) : torch::autograd::Edge());
  }
  auto node = std::shared_ptr<RecomputedLayerBackward>(
      new RecomputedLayerBackward(std::move(kept), std::move(needs_grad), std::move(layer),
                                  std::move(generators)),
      torch::autograd::deleteNode);
  node->set_next_edges(std::move(edges));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace deepnet::pipeline
