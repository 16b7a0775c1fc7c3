#include "data/multilingual_stream.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/splitmix64.h"

namespace deepnet::data {

std::vector<double> TemperatureProbabilities(const std::vector<int64_t>& sizes,
                                             double temperature) {
  std::vector<double> p(sizes.size(), 0.0);
  const double total = static_cast<double>(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}));
  if (total <= 0.0) return p;
  const double exponent = temperature > 0.0 ? 1.0 / temperature : 1.0;
  double norm = 0.0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    p[i] = sizes[i] > 0 ? std::pow(static_cast<double>(sizes[i]) / total, exponent) : 0.0;
    norm += p[i];
  }
  for (double& x : p) x /= norm;
  return p;
}

MultilingualBatchStream::MultilingualBatchStream(
    std::vector<const std::vector<TokenizedExample>*> pairs,
    const MultilingualStreamOptions& options)
    : options_(options) {
  std::vector<int64_t> sizes;
  for (size_t p = 0; p < pairs.size(); ++p) {
    TokenBatcherOptions batching = options.batching;
    // Each pair shuffles with its own seed so pairs do not share an order.
    batching.seed = SplitMix64::MixSeeds(options.seed, p + 1);
    batchers_.push_back(std::make_unique<TokenBatcher>(pairs[p], batching));
    sizes.push_back(static_cast<int64_t>(pairs[p]->size()));
  }
  probabilities_ = TemperatureProbabilities(sizes, options.temperature);
  cumulative_.resize(probabilities_.size());
  std::partial_sum(probabilities_.begin(), probabilities_.end(), cumulative_.begin());
}

int64_t MultilingualBatchStream::DrawPair(int64_t position) const {
  // A uniform double in [0, 1) from 53 random bits of a generator seeded by (seed, position).
  SplitMix64 rng(SplitMix64::MixSeeds(options_.seed ^ 0x5bd1e995ULL, static_cast<uint64_t>(position)));
  const double u = static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
  auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  int64_t pair = std::min<int64_t>(it - cumulative_.begin(), pairs() - 1);
  while (probabilities_[pair] == 0.0 && pair > 0) --pair;  // Rounding at the top end.
  return pair;
}

StreamBatch MultilingualBatchStream::Next() {
  // One round of `world` consecutive global batches; this rank keeps the rank-th. Drawing the
  // whole round leaves position_ and every pair cursor where all ranks leave them.
  StreamBatch mine;
  for (int64_t k = 0; k < options_.world; ++k) {
    const int64_t position = position_++;
    const int64_t pair = DrawPair(position);
    std::vector<int64_t> indices = batchers_[pair]->Next();
    if (k == options_.rank) mine = {pair, std::move(indices), position};
  }
  return mine;
}

StreamState MultilingualBatchStream::state() const {
  StreamState s;
  s.position = position_;
  for (const auto& b : batchers_) s.pair_cursors.push_back(b->cursor());
  return s;
}

absl::Status MultilingualBatchStream::Restore(const StreamState& state) {
  if (state.pair_cursors.size() != batchers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data stream state has ", state.pair_cursors.size(),
                                                   " language pairs, the data has ", batchers_.size()));
  }
  position_ = state.position;
  for (size_t p = 0; p < batchers_.size(); ++p) batchers_[p]->Seek(state.pair_cursors[p]);
  return absl::OkStatus();
}

}  // namespace deepnet::data
