#include "worker/adamw.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace deepnet::worker {

AdamW::AdamW(FlatParameters* params, const AdamWOptions& options)
    : params_(params), options_(options) {
  exp_avg_ = torch::zeros_like(params_->values());
  exp_avg_sq_ = torch::zeros_like(params_->values());
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_count_;
  torch::Tensor& p = params_->values();
  const torch::Tensor& g = params_->grads();
  const double b1 = options_.beta1, b2 = options_.beta2;
  if (options_.weight_decay > 0.0) {
    p.addcmul_(p, params_->decay_mask(), -lr * options_.weight_decay);
  }
  exp_avg_.mul_(b1).add_(g, 1.0 - b1);
  exp_avg_sq_.mul_(b2).addcmul_(g, g, 1.0 - b2);
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(step_count_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(step_count_));
  torch::Tensor denom = exp_avg_sq_.sqrt().div_(std::sqrt(bias2)).add_(options_.eps);
  p.addcdiv_(exp_avg_, denom, -lr / bias1);
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

}  // namespace deepnet::worker
