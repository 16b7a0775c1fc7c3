#include "data/token_batcher.h"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include "data/splitmix64.h"

namespace deepnet::data {
namespace {

int64_t Len(const std::vector<int32_t>& ids) { return static_cast<int64_t>(ids.size()); }

}  // namespace

TokenBatcher::TokenBatcher(const std::vector<TokenizedExample>* examples,
                           const TokenBatcherOptions& options)
    : examples_(examples), options_(options) {
  const std::vector<TokenizedExample>& corpus = *examples_;
  std::vector<int64_t> sorted(corpus.size());
  std::iota(sorted.begin(), sorted.end(), int64_t{0});
  // Stable, so equal-length examples keep corpus order and the batches are reproducible.
  std::stable_sort(sorted.begin(), sorted.end(), [&corpus](int64_t a, int64_t b) {
    const TokenizedExample& x = corpus[static_cast<size_t>(a)];
    const TokenizedExample& y = corpus[static_cast<size_t>(b)];
    return std::make_pair(Len(x.src), Len(x.tgt)) < std::make_pair(Len(y.src), Len(y.tgt));
  });

  // Greedy packing of the sorted run. The decoder sees BOS + tgt minus its last token and is
  // scored on tgt, so a tgt of n tokens is counted as n + 1 padded positions.
  std::vector<int64_t> batch;
  int64_t longest_src = 0;
  int64_t longest_tgt = 0;
  for (int64_t index : sorted) {
    const TokenizedExample& example = corpus[static_cast<size_t>(index)];
    const int64_t src = std::max(longest_src, Len(example.src));
    const int64_t tgt = std::max(longest_tgt, Len(example.tgt));
    const auto count = static_cast<int64_t>(batch.size()) + 1;
    const bool over_tokens = count * std::max(src, tgt + 1) > options_.max_tokens;
    const bool over_sentences = options_.max_sentences > 0 && count > options_.max_sentences;
    if (!batch.empty() && (over_tokens || over_sentences)) {
      batches_.push_back(std::move(batch));
      batch.clear();
      longest_src = 0;
      longest_tgt = 0;
    }
    batch.push_back(index);
    longest_src = std::max(longest_src, Len(example.src));
    longest_tgt = std::max(longest_tgt, Len(example.tgt));
  }
  if (!batch.empty()) batches_.push_back(std::move(batch));
}

std::vector<int64_t> TokenBatcher::Next() {
  // Empty corpus: there is nothing to return and no epoch to advance.
  if (batches_.empty()) return {};
  if (cursor_.batch >= batches_per_epoch()) {
    ++cursor_.epoch;
    cursor_.batch = 0;
  }
  if (order_epoch_ != cursor_.epoch) Reorder();
  std::vector<int64_t> batch = batches_[static_cast<size_t>(order_[cursor_.batch])];
  ++cursor_.batch;
  if (cursor_.batch == batches_per_epoch()) {
    // Report the start of the next epoch, so a checkpoint taken here resumes there.
    ++cursor_.epoch;
    cursor_.batch = 0;
  }
  return batch;
}

void TokenBatcher::Seek(const BatchCursor& cursor) {
  cursor_.epoch = std::max<int64_t>(cursor.epoch, 0);
  cursor_.batch = std::clamp<int64_t>(cursor.batch, 0, batches_per_epoch());
}

void TokenBatcher::Reorder() {
  order_.resize(batches_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  order_epoch_ = cursor_.epoch;
  if (!options_.shuffle) return;
  // Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P) over our own generator: std::shuffle's
  // output differs between standard libraries, and a resumed run must see the same order.
  SplitMix64 rng(SplitMix64::MixSeeds(options_.seed, static_cast<uint64_t>(cursor_.epoch)));
  for (size_t i = order_.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(rng.UniformBelow(i));
    std::swap(order_[i - 1], order_[j]);
  }
}

}  // namespace deepnet::data
