#include "model/loss.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>

namespace deepnet::model {
namespace {

// Rows of logits widened to fp32 at a time: 16M elements (64 MiB of fp32), so that the loss
// never holds an fp32 copy, log-probabilities or a one-hot of the whole [N, V] logits.
std::atomic<int64_t> chunk_elements{int64_t{1} << 24};

int64_t RowsPerChunk(int64_t vocab) {
  return std::max<int64_t>(1, chunk_elements.load(std::memory_order_relaxed) / vocab);
}

// Label-smoothed cross-entropy with its gradient written in one pass per chunk of rows:
//   loss = sum over kept rows of c (lse - x_t) + e (V lse - sum_v x_v),
//   c = 1 - eps - e, e = eps / (V - 1),
//   d loss / d x_v = keep (p_v - c [v = t] - e)      (c + e V = 1)
// with lse the row's log-sum-exp and p its softmax. Forward keeps the logits (as they came)
// and each row's lse; the fp32 log-probabilities ATen's log_softmax + gather + sum would keep
// (and the one-hot and summed gradients its backward builds) never exist.
class SmoothedCrossEntropy : public torch::autograd::Function<SmoothedCrossEntropy> {
 public:
  // Returns [loss, nll] (fp32); nll's gradient is ignored.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& target, double epsilon, int64_t pad_id) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t vocab = logits.size(1), rows = logits.size(0);
    const double e = vocab > 1 ? epsilon / static_cast<double>(vocab - 1) : 0.0;
    const double c = 1.0 - epsilon - e;
    torch::Tensor lse = torch::empty({rows}, logits.options().dtype(torch::kFloat));
    torch::Tensor nll = torch::zeros({}, lse.options().dtype(torch::kDouble));
    torch::Tensor smooth = torch::zeros({}, nll.options());
    const torch::Tensor keep = target.ne(pad_id);
    const int64_t step = RowsPerChunk(vocab);
    for (int64_t r = 0; r < rows; r += step) {
      const int64_t n = std::min(step, rows - r);
      const torch::Tensor x = logits.narrow(0, r, n).to(torch::kFloat);
      const torch::Tensor t = target.narrow(0, r, n);
      const torch::Tensor k = keep.narrow(0, r, n);
      torch::Tensor row_lse = torch::logsumexp(x, 1);
      lse.narrow(0, r, n).copy_(row_lse);
      // Per kept row: lse - x_t, and V lse - sum_v x_v.
      const torch::Tensor picked = x.gather(1, t.unsqueeze(1)).squeeze(1);
      nll += (row_lse - picked).masked_fill(~k, 0.0).sum(torch::kDouble);
      if (epsilon > 0.0) {
        smooth += (row_lse * static_cast<double>(vocab) - x.sum(1)).masked_fill(~k, 0.0)
                      .sum(torch::kDouble);
      }
    }
    ctx->save_for_backward({logits, target, lse});
    ctx->saved_data["epsilon"] = epsilon;
    ctx->saved_data["pad_id"] = pad_id;
    const torch::Tensor loss = epsilon > 0.0 ? nll * c + smooth * e : nll;
    return torch::stack({loss, nll}).to(torch::kFloat);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& logits = saved[0];
    const torch::Tensor& target = saved[1];
    const torch::Tensor& lse = saved[2];
    const double epsilon = ctx->saved_data["epsilon"].toDouble();
    const int64_t pad_id = ctx->saved_data["pad_id"].toInt();
    const int64_t vocab = logits.size(1), rows = logits.size(0);
    const double e = vocab > 1 ? epsilon / static_cast<double>(vocab - 1) : 0.0;
    const double c = 1.0 - epsilon - e;
    // The output is [loss, nll]; nll is handed out detached, so only the loss's gradient
    // counts (a 0-dim tensor on the device: no wait for the host).
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor g = grads[0].select(0, 0).to(torch::kFloat);
    torch::Tensor grad = torch::empty_like(logits, torch::MemoryFormat::Contiguous);
    const int64_t step = RowsPerChunk(vocab);
    for (int64_t r = 0; r < rows; r += step) {
      const int64_t n = std::min(step, rows - r);
      const torch::Tensor t = target.narrow(0, r, n).unsqueeze(1);
      // p - e everywhere, then - c at the target, zero on padded rows, times g.
      torch::Tensor d = logits.narrow(0, r, n).to(torch::kFloat);
      d.sub_(lse.narrow(0, r, n).unsqueeze(1)).exp_();
      if (e != 0.0) d.sub_(e);
      d.scatter_add_(1, t, torch::full({n, 1}, -c, d.options()));
      d.mul_(target.narrow(0, r, n).ne(pad_id).unsqueeze(1).to(torch::kFloat).mul_(g));
      grad.narrow(0, r, n).copy_(d);
    }
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

namespace internal {
int64_t SetLossChunkElements(int64_t elements) {
  return chunk_elements.exchange(std::max<int64_t>(1, elements));
}
}  // namespace internal

LossOutput LabelSmoothedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& target,
                                     double epsilon, int64_t pad_id, int64_t known_tokens) {
  TORCH_CHECK(epsilon >= 0.0 && epsilon < 1.0, "label smoothing must be in [0, 1), got ", epsilon);
  const int64_t vocab = logits.size(-1);
  TORCH_CHECK(logits.numel() / vocab == target.numel(), "logits ", logits.sizes(),
              " do not match target ", target.sizes());
  const torch::Tensor flat_target = target.reshape({-1});
  const torch::Tensor both = SmoothedCrossEntropy::apply(logits.reshape({-1, vocab}),
                                                         flat_target, epsilon, pad_id);
  LossOutput out;
  out.loss = both[0];
  out.nll = both[1].detach();
  out.tokens = known_tokens >= 0 ? known_tokens : flat_target.ne(pad_id).sum().item<int64_t>();
  return out;
}

}  // namespace deepnet::model
