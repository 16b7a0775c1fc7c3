#include "pipeline/adamw.h"

#include <ATen/record_function.h>
#include <torch/torch.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#include <ATen/ops/_fused_adamw.h>
#define DEEPNET_HAVE_FUSED_ADAMW 1
#endif

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"

namespace deepnet::pipeline {
namespace {

// Step() works through the flat buffers in chunks of this many elements, so that a chunk's
// parameters, gradients, moments and denominator (128 KiB each) stay in L2 between its passes.
constexpr int64_t kStepChunk = 32 * 1024;

// StepWithAtenOps works in chunks of this many elements (64 MiB of fp32 scratch): large enough
// that a chunk's kernels run long next to their launch, small next to the parameters.
constexpr int64_t kAtenChunk = 16 * 1024 * 1024;

// Scalars of one update, in the precision the per-element arithmetic uses (as ATen's
// element-wise ops on float tensors cast their scalar arguments to float).
struct UpdateScalars {
  float decay;         // -lr * weight_decay (applied where the decay mask is 1)
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float sqrt_bias2;    // sqrt(1 - beta2^t)
  float eps;
  float step;          // -lr / (1 - beta1^t)
  float grad;          // the gradient's multiplier (clipping), 1 when not clipped
};

// Elements [begin, end) of the flat buffers: the arithmetic of the whole-buffer ops
//   p.addcmul_(p, mask, decay); m.mul_(b1).add_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
//   denom = v.sqrt().div_(sqrt_bias2).add_(eps); p.addcdiv_(m, denom, step)
// in three cache-resident passes instead of eight passes over memory. The two loops are plain
// element-wise code the compiler vectorises; the square root is ATen's vectorised kernel.
// `v` is not __restrict: sqrt_out reads the same elements through `v_flat`.
void UpdateChunk(const UpdateScalars s, int64_t begin, int64_t end, float* __restrict p,
                 const float* __restrict g, float* __restrict m, float* v,
                 const float* __restrict decay_mask, const torch::Tensor& v_flat,
                 const torch::Tensor& denom_scratch) {
  // Locals, so that the compiler need not reload them after each store through p, m or v.
  const float decay = s.decay, beta1 = s.beta1, one_minus_beta1 = s.one_minus_beta1;
  const float beta2 = s.beta2, one_minus_beta2 = s.one_minus_beta2;
  const float sqrt_bias2 = s.sqrt_bias2, eps = s.eps, step = s.step, grad = s.grad;
  const int64_t n = end - begin;
  p += begin;
  g += begin;
  m += begin;
  v += begin;
  if (decay_mask != nullptr) {
    decay_mask += begin;
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] + decay * p[i] * decay_mask[i];
  }
  if (grad == 1.0f) {
    for (int64_t i = 0; i < n; ++i) {
      m[i] = m[i] * beta1 + one_minus_beta1 * g[i];
      v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
    }
  } else {
    // The clipped gradient, rounded once as grads.mul_(grad) would round it.
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad;
      m[i] = m[i] * beta1 + one_minus_beta1 * gi;
      v[i] = v[i] * beta2 + one_minus_beta2 * gi * gi;
    }
  }
  torch::Tensor denom_tensor = denom_scratch.narrow(0, 0, n);
  torch::sqrt_out(denom_tensor, v_flat.narrow(0, begin, n));
  float* __restrict denom = denom_tensor.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    p[i] = p[i] + step * m[i] / (denom[i] / sqrt_bias2 + eps);
  }
}

// 1 - beta^t for both moments at step t.
struct BiasCorrections {
  double first, second;
};
BiasCorrections CorrectionsAt(const AdamWOptions& o, int64_t step) {
  return {1.0 - std::pow(o.beta1, static_cast<double>(step)),
          1.0 - std::pow(o.beta2, static_cast<double>(step))};
}

}  // namespace

AdamW::AdamW(FlatParameters* params, const AdamWOptions& options)
    : params_(params), options_(options) {
  exp_avg_ = torch::zeros_like(params_->values());
  exp_avg_sq_ = torch::zeros_like(params_->values());
}

void AdamW::StepWithAtenOps(double lr, double grad_multiplier) {
  RECORD_USER_SCOPE("deepnet::optimizer");
  torch::NoGradGuard no_grad;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const auto [bias1, bias2] = CorrectionsAt(options_, ++step_count_);
  torch::Tensor& values = params_->values();
  const torch::Tensor& grads = params_->grads();
  const bool decay = options_.weight_decay > 0.0;
  const int64_t total = values.numel();
  if (!denom_scratch_.defined()) {
    denom_scratch_ = torch::empty({std::min(kAtenChunk, std::max<int64_t>(1, total))},
                                  exp_avg_sq_.options());
  }
  for (int64_t begin = 0; begin < total; begin += kAtenChunk) {
    const int64_t n = std::min(kAtenChunk, total - begin);
    torch::Tensor p = values.narrow(0, begin, n), g = grads.narrow(0, begin, n);
    torch::Tensor m = exp_avg_.narrow(0, begin, n), v = exp_avg_sq_.narrow(0, begin, n);
    torch::Tensor denom = denom_scratch_.narrow(0, 0, n);
    if (grad_multiplier != 1.0) g.mul_(grad_multiplier);
    if (decay) p.addcmul_(p, params_->decay_mask().narrow(0, begin, n), -lr * options_.weight_decay);
    m.mul_(b1).add_(g, 1.0 - b1);
    v.mul_(b2).addcmul_(g, g, 1.0 - b2);
    torch::sqrt_out(denom, v).div_(std::sqrt(bias2)).add_(options_.eps);
    p.addcdiv_(m, denom, -lr / bias1);
  }
}

void AdamW::Step(double lr, double grad_multiplier) {
  torch::Tensor& values = params_->values();
  const torch::Tensor& grads = params_->grads();
  if (!values.device().is_cpu() || !values.is_contiguous() || !grads.is_contiguous()) {
#ifdef DEEPNET_HAVE_FUSED_ADAMW
    if (values.is_cuda() && values.scalar_type() == torch::kFloat &&
        grads.scalar_type() == torch::kFloat) {
      RECORD_USER_SCOPE("deepnet::optimizer");
      torch::NoGradGuard no_grad;
      ++step_count_;
      // The decay mask first (the fused kernel would decay every element), then moments and
      // update in one kernel, with the step count it reads from the device.
      if (options_.weight_decay > 0.0) {
        values.addcmul_(values, params_->decay_mask(), -lr * options_.weight_decay);
      }
      if (!step_tensor_.defined()) step_tensor_ = torch::zeros({}, values.options());
      step_tensor_.fill_(static_cast<double>(step_count_));
      // The kernel divides the gradients by grad_scale (AMP's unscaling): the clipping.
      std::optional<torch::Tensor> grad_scale;
      if (grad_multiplier != 1.0) {
        grad_scale = torch::full({}, 1.0 / grad_multiplier, values.options());
      }
      at::_fused_adamw_({values}, {grads}, {exp_avg_}, {exp_avg_sq_}, {}, {step_tensor_}, lr,
                        options_.beta1, options_.beta2, /*weight_decay=*/0.0, options_.eps,
                        /*amsgrad=*/false, /*maximize=*/false, grad_scale);
      return;
    }
#endif
    StepWithAtenOps(lr, grad_multiplier);
    return;
  }
  RECORD_USER_SCOPE("deepnet::optimizer");
  torch::NoGradGuard no_grad;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const auto [bias1, bias2] = CorrectionsAt(options_, ++step_count_);
  const bool decay = options_.weight_decay > 0.0;
  const int64_t total = values.numel();
  const UpdateScalars s{static_cast<float>(-lr * options_.weight_decay),
                        static_cast<float>(b1),
                        static_cast<float>(1.0 - b1),
                        static_cast<float>(b2),
                        static_cast<float>(1.0 - b2),
                        static_cast<float>(std::sqrt(bias2)),
                        static_cast<float>(options_.eps),
                        static_cast<float>(-lr / bias1),
                        static_cast<float>(grad_multiplier)};
  float* p = values.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  const float* mask = decay ? params_->decay_mask().data_ptr<float>() : nullptr;
  // Chunks are independent: the intra-op pool takes several at once.
  at::parallel_for(0, total, kStepChunk, [&](int64_t begin, int64_t end) {
    torch::Tensor scratch = torch::empty({std::min(kStepChunk, end - begin)}, exp_avg_.options());
    for (int64_t b = begin; b < end; b += kStepChunk) {
      UpdateChunk(s, b, std::min(end, b + kStepChunk), p, g, m, v, mask, exp_avg_sq_, scratch);
    }
  });
}

std::vector<std::pair<std::string, torch::Tensor>> AdamW::ExportState() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  const auto& entries = params_->entries();
  out.reserve(2 * entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out.emplace_back("exp_avg." + entries[i].name, params_->View(exp_avg_, i));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    out.emplace_back("exp_avg_sq." + entries[i].name, params_->View(exp_avg_sq_, i));
  }
  return out;
}

absl::Status AdamW::ImportState(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                int64_t step_count) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  torch::NoGradGuard no_grad;
  const auto& entries = params_->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    for (auto [prefix, flat] : {std::pair{"exp_avg.", &exp_avg_}, {"exp_avg_sq.", &exp_avg_sq_}}) {
      const std::string name = prefix + entries[i].name;
      auto it = by_name.find(name);
      if (it == by_name.end()) return absl::NotFoundError(absl::StrCat("optimizer state ", name, " missing"));
      torch::Tensor view = params_->View(*flat, i);
      if (it->second->sizes() != view.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer state ", name, " has shape ",
                                                       c10::str(it->second->sizes()), ", expected ",
                                                       c10::str(view.sizes())));
      }
      view.copy_(*it->second);
    }
  }
  step_count_ = step_count;
  return absl::OkStatus();
}

double InverseSqrtLearningRate(int64_t step, double lr, int64_t warmup_steps,
                               double warmup_init_lr) {
  if (step < 1) step = 1;
  if (warmup_steps > 0 && step < warmup_steps) {
    return warmup_init_lr + (lr - warmup_init_lr) * static_cast<double>(step) /
                                static_cast<double>(warmup_steps);
  }
  if (warmup_steps <= 0) return lr;
  return lr * std::sqrt(static_cast<double>(warmup_steps) / static_cast<double>(step));
}

}  // namespace deepnet::pipeline
