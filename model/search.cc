#include "model/search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace deepnet::model {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Puts the model in eval mode and restores its training flag when decoding ends.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(DeepNetImpl& model) : model_(model), was_training_(model.is_training()) {
    model_.eval();
  }
  ~EvalModeGuard() { model_.train(was_training_); }

 private:
  DeepNetImpl& model_;
  bool was_training_;
};

// Number of decoding steps, EOS included.
int64_t MaxSteps(const DeepNetImpl& model, const torch::Tensor& src, const SearchOptions& o) {
  const double limit = o.max_len_a * static_cast<double>(src.size(1)) + o.max_len_b;
  return std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(limit),
                                                model.config().max_positions()));
}

// Log-probabilities [N, V] of the next token. BOS and PAD are never produced; on the last
// step only EOS is allowed, so every hypothesis ends within the limit.
torch::Tensor NextLogProbs(DeepNetImpl& model, const torch::Tensor& last_tokens,
                           const EncoderOutput& enc, DecoderState& state, bool last_step,
                           const SearchOptions& o) {
  auto hidden = model.decode(last_tokens.unsqueeze(1), enc, &state);
  auto lprobs = torch::log_softmax(model.output_logits(hidden.squeeze(1)).to(torch::kFloat), -1);
  if (last_step) {
    auto eos = lprobs.select(1, o.eos_id).clone();
    lprobs.fill_(kNegInf);
    lprobs.select(1, o.eos_id).copy_(eos);
    return lprobs;
  }
  lprobs.select(1, o.pad_id).fill_(kNegInf);
  if (o.bos_id != o.eos_id) lprobs.select(1, o.bos_id).fill_(kNegInf);
  return lprobs;
}

double Normalize(double score, size_t length, double penalty) {
  return score / std::pow(static_cast<double>(length), penalty);
}

EncoderOutput EncodeIfAny(DeepNetImpl& model, const torch::Tensor& src) {
  return model.config().encoder_layers() > 0 ? model.encode(src) : EncoderOutput{};
}

EncoderOutput Expand(const EncoderOutput& enc, int64_t beams) {
  EncoderOutput out;
  if (enc.out.defined()) out.out = enc.out.repeat_interleave(beams, 0);
  if (enc.padding_mask.defined()) out.padding_mask = enc.padding_mask.repeat_interleave(beams, 0);
  return out;
}

}  // namespace

std::vector<Hypothesis> GreedySearch(DeepNetImpl& model, const torch::Tensor& src_tokens,
                                     const SearchOptions& o) {
  torch::NoGradGuard no_grad;
  EvalModeGuard eval(model);
  const int64_t batch = src_tokens.size(0);
  const int64_t steps = MaxSteps(model, src_tokens, o);
  EncoderOutput enc = EncodeIfAny(model, src_tokens);
  DecoderState state = model.initial_state();
  std::vector<Hypothesis> hyps(batch);
  std::vector<bool> done(batch, false);
  auto last = torch::full({batch}, o.bos_id, src_tokens.options());
  for (int64_t step = 0; step < steps; ++step) {
    auto lprobs = NextLogProbs(model, last, enc, state, step == steps - 1, o);
    auto [best_lp, best] = lprobs.max(-1);
    auto best_cpu = best.cpu();
    auto lp_cpu = best_lp.to(torch::kDouble).cpu();
    const auto* tok = best_cpu.data_ptr<int64_t>();
    const auto* lp = lp_cpu.data_ptr<double>();
    bool all_done = true;
    for (int64_t i = 0; i < batch; ++i) {
      if (done[i]) continue;
      hyps[i].score += lp[i];
      if (tok[i] == o.eos_id) {
        done[i] = true;
      } else {
        hyps[i].tokens.push_back(tok[i]);
        all_done = false;
      }
    }
    if (all_done) break;
    last = best;
  }
  for (auto& h : hyps) {
    h.normalized_score = Normalize(h.score, h.tokens.size() + 1, o.length_penalty);
  }
  return hyps;
}

std::vector<Hypothesis> BeamSearch(DeepNetImpl& model, const torch::Tensor& src_tokens,
                                   const SearchOptions& o) {
  TORCH_CHECK(o.beam_size >= 1, "beam_size must be >= 1, got ", o.beam_size);
  torch::NoGradGuard no_grad;
  EvalModeGuard eval(model);
  const int64_t batch = src_tokens.size(0), k = o.beam_size;
  const int64_t steps = MaxSteps(model, src_tokens, o);
  const auto device = src_tokens.device();
  EncoderOutput enc = Expand(EncodeIfAny(model, src_tokens), k);
  DecoderState state = model.initial_state();

  // Row r = b * k + j is beam j of sentence b. Only beam 0 is live at the start.
  std::vector<std::vector<int64_t>> tokens(batch * k);
  std::vector<double> scores(batch * k, kNegInf);
  for (int64_t b = 0; b < batch; ++b) scores[b * k] = 0.0;
  std::vector<std::vector<Hypothesis>> finished(batch);
  std::vector<bool> done(batch, false);
  auto last = torch::full({batch * k}, o.bos_id, src_tokens.options());

  for (int64_t step = 0; step < steps; ++step) {
    auto lprobs = NextLogProbs(model, last, enc, state, step == steps - 1, o).to(torch::kDouble);
    const int64_t vocab = lprobs.size(1);
    auto beam_scores = torch::from_blob(scores.data(), {batch * k, 1}, torch::kDouble).to(device);
    auto cand = (lprobs + beam_scores).view({batch, k * vocab});
    auto [top_scores, top_index] = cand.topk(std::min<int64_t>(2 * k, k * vocab), 1);
    top_scores = top_scores.cpu();
    top_index = top_index.cpu();
    const int64_t width = top_scores.size(1);
    const auto* ts = top_scores.data_ptr<double>();
    const auto* ti = top_index.data_ptr<int64_t>();

    std::vector<int64_t> source_row(batch * k), next_token(batch * k, o.pad_id);
    std::vector<double> next_score(batch * k, kNegInf);
    std::vector<std::vector<int64_t>> next_tokens(batch * k);
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t live = 0;
      for (int64_t j = 0; j < k; ++j) source_row[b * k + j] = b * k;
      if (!done[b]) {
        for (int64_t c = 0; c < width && live < k; ++c) {
          const double s = ts[b * width + c];
          if (s == kNegInf) break;
          const int64_t row = b * k + ti[b * width + c] / vocab;
          const int64_t token = ti[b * width + c] % vocab;
          if (token == o.eos_id) {
            if (static_cast<int64_t>(finished[b].size()) < k) {
              Hypothesis h{tokens[row], s, Normalize(s, tokens[row].size() + 1, o.length_penalty)};
              finished[b].push_back(std::move(h));
            }
            continue;
          }
          const int64_t dst = b * k + live++;
          source_row[dst] = row;
          next_token[dst] = token;
          next_score[dst] = s;
          next_tokens[dst] = tokens[row];
          next_tokens[dst].push_back(token);
        }
        done[b] = static_cast<int64_t>(finished[b].size()) >= k || live == 0;
      }
      all_done = all_done && done[b];
    }
    if (all_done) break;
    auto index = torch::tensor(source_row, torch::kLong).to(device);
    state.Reorder(index);
    tokens = std::move(next_tokens);
    scores = std::move(next_score);
    last = torch::tensor(next_token, torch::kLong).to(device);
  }

  std::vector<Hypothesis> best(batch);
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_INTERNAL_ASSERT(!finished[b].empty(), "beam search ended without a hypothesis");
    best[b] = *std::max_element(finished[b].begin(), finished[b].end(),
                                [](const Hypothesis& x, const Hypothesis& y) {
                                  return x.normalized_score < y.normalized_score;
                                });
  }
  return best;
}

}  // namespace deepnet::model
