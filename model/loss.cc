#include "model/loss.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

namespace deepnet::model {

LossOutput LabelSmoothedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                     double epsilon, int64_t pad_id, int64_t known_tokens) {
  TORCH_CHECK(epsilon >= 0.0 && epsilon < 1.0, "label smoothing must be in [0, 1), got ", epsilon);
  const int64_t vocab = logits.size(-1);
  TORCH_CHECK(logits.numel() / vocab == target.numel(), "logits ", logits.sizes(),
              " do not match target ", target.sizes());
  // fp32 whatever the logits' dtype and the autocast state (bf16 logits are widened first).
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  auto lprobs = torch::log_softmax(logits.reshape({-1, vocab}).to(torch::kFloat), -1);
  auto flat_target = target.reshape({-1, 1});
  auto keep = flat_target.ne(pad_id);
  auto nll = -lprobs.gather(1, flat_target).masked_fill(~keep, 0.0).sum();
  LossOutput out;
  out.tokens = known_tokens >= 0 ? known_tokens : keep.sum().item<int64_t>();
  if (epsilon > 0.0) {
    auto smooth = -lprobs.sum(-1, /*keepdim=*/true).masked_fill(~keep, 0.0).sum();
    const double eps_i = vocab > 1 ? epsilon / static_cast<double>(vocab - 1) : 0.0;
    out.loss = nll * (1.0 - epsilon - eps_i) + smooth * eps_i;
  } else {
    out.loss = nll;
  }
  out.nll = nll.detach();
  return out;
}

}  // namespace deepnet::model
