#pragma once

#include <cstdint>
#include <vector>

#include "data/parallel_corpus.h"

namespace deepnet::data {

/// Where an iterator stands: the epoch and the index of the next batch within that epoch's
/// (shuffled) batch order. Saved in checkpoints so a resumed run sees the same batches.
struct BatchCursor {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const BatchCursor& o) const { return epoch == o.epoch && batch == o.batch; }
};

struct TokenBatcherOptions {
  // Upper bound on padded tokens in a batch: count * max(longest src, longest tgt + 1).
  // A single example longer than this still forms a batch of one.
  int64_t max_tokens = 4096;
  // Upper bound on sentences per batch; 0 means no bound.
  int64_t max_sentences = 0;
  // Seeds the per-epoch shuffle of batch order (deterministic on every platform: a
  // Fisher-Yates shuffle over splitmix64/mt19937_64 output, not std::shuffle).
  uint64_t seed = 1;
  // Shuffle batch order each epoch; false keeps length order (for evaluation).
  bool shuffle = true;
};

/// Groups examples of similar length into batches bounded by tokens, and walks the batches
/// epoch after epoch in a seeded order. Batches are formed once (sorted by source then target
/// length, stable); each epoch permutes their order with seed + epoch.
/// Not thread-safe: owned by the training loop.
class TokenBatcher {
 public:
  // `examples` must be non-null; it is read only here, when the batches are formed.
  TokenBatcher(const std::vector<TokenizedExample>* examples, const TokenBatcherOptions& options);

  // Example indices of the batch at the cursor; advances the cursor (after an epoch's last
  // batch it reads {epoch + 1, 0}). Never empty when the corpus is non-empty; for an empty
  // corpus (batches_per_epoch() == 0) returns an empty vector and leaves the cursor as is.
  std::vector<int64_t> Next();

  const BatchCursor& cursor() const { return cursor_; }
  // Jumps to a saved position; an out-of-range batch index is clamped to the epoch's end.
  void Seek(const BatchCursor& cursor);

  int64_t batches_per_epoch() const { return static_cast<int64_t>(batches_.size()); }
  // All batches in length order (no shuffle), for evaluation passes.
  const std::vector<std::vector<int64_t>>& batches() const { return batches_; }

 private:
  void Reorder();  // Computes order_ for cursor_.epoch.

  const std::vector<TokenizedExample>* examples_;
  TokenBatcherOptions options_;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<int64_t> order_;  // [position in epoch] -> batch index
  int64_t order_epoch_ = -1;
  BatchCursor cursor_;
};

}  // namespace deepnet::data
