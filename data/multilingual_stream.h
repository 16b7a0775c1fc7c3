#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/parallel_corpus.h"
#include "data/token_batcher.h"

namespace deepnet::data {

/// Where a stream stands. Identical on every data-parallel rank (every rank draws every global
/// batch and keeps its own), so it can be saved once and restored with any number of ranks.
struct StreamState {
  int64_t position = 0;                   // Global batches drawn so far.
  std::vector<BatchCursor> pair_cursors;  // [pair] position of that pair's batcher.
};

struct MultilingualStreamOptions {
  // Sampling temperature: pair p is drawn with probability ∝ (n_p / N)^(1/T). 1 samples in
  // proportion to size; larger T upsamples small pairs (multilingual NMT uses T = 5).
  double temperature = 5.0;
  uint64_t seed = 1;
  // Batch bounds and per-epoch shuffling inside each pair.
  TokenBatcherOptions batching;
  // This process's data-parallel rank among `world` ranks: each Next() draws a round of
  // `world` consecutive global batches and keeps the rank-th, so after every Next() the state is
  // the same on all ranks (and a run resumes from it with any number of ranks).
  int64_t rank = 0;
  int64_t world = 1;
};

/// One batch for this rank.
struct StreamBatch {
  int64_t pair = 0;              // Index of the language pair it came from.
  std::vector<int64_t> indices;  // Example indices within that pair.
  int64_t position = 0;          // Global position of the batch.
};

/// An endless, deterministic stream of token-bounded batches drawn across language pairs with
/// temperature sampling. Each pair has its own length-bucketed, per-epoch-shuffled batcher;
/// the pair of global batch i is drawn from a generator seeded by (seed, i), so the sequence
/// depends only on the seed and the data, not on the number of ranks.
/// Not thread-safe: owned by one loader thread.
class MultilingualBatchStream {
 public:
  // `pairs[p]` are the examples of pair p; they must outlive the stream and be non-empty.
  MultilingualBatchStream(std::vector<const std::vector<TokenizedExample>*> pairs,
                          const MultilingualStreamOptions& options);

  // The next batch of this rank (draws the other ranks' batches of the round and skips them).
  StreamBatch Next();

  StreamState state() const;
  // Restores a saved state; an error when it was saved for another number of pairs.
  [[nodiscard]] absl::Status Restore(const StreamState& state);

  // Sampling probability of each pair.
  const std::vector<double>& probabilities() const { return probabilities_; }
  int64_t pairs() const { return static_cast<int64_t>(batchers_.size()); }

 private:
  int64_t DrawPair(int64_t position) const;

  MultilingualStreamOptions options_;
  std::vector<std::unique_ptr<TokenBatcher>> batchers_;  // [pair]
  std::vector<double> probabilities_;                    // [pair]
  std::vector<double> cumulative_;                       // [pair]
  int64_t position_ = 0;
};

/// Temperature-sampling probabilities ∝ (n_p / N)^(1/T) for pair sizes n_p.
std::vector<double> TemperatureProbabilities(const std::vector<int64_t>& sizes, double temperature);

}  // namespace deepnet::data
