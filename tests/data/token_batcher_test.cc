#include "data/token_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "data/splitmix64.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TokenizedExample Example(int src_len, int tgt_len) {
  return {std::vector<int32_t>(static_cast<size_t>(src_len), 7),
          std::vector<int32_t>(static_cast<size_t>(tgt_len), 8)};
}

// A corpus of varied lengths (1..40 source, 1..30 target), fixed by the seed.
std::vector<TokenizedExample> MakeCorpus(int size, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<TokenizedExample> corpus;
  for (int i = 0; i < size; ++i) {
    corpus.push_back(Example(1 + static_cast<int>(rng.UniformBelow(40)),
                             1 + static_cast<int>(rng.UniformBelow(30))));
  }
  return corpus;
}

TokenBatcherOptions Options(int64_t max_tokens, uint64_t seed = 1, bool shuffle = true) {
  TokenBatcherOptions options;
  options.max_tokens = max_tokens;
  options.seed = seed;
  options.shuffle = shuffle;
  return options;
}

int64_t PaddedTokens(const std::vector<TokenizedExample>& corpus,
                     const std::vector<int64_t>& batch) {
  size_t src = 0;
  size_t tgt = 0;
  for (int64_t i : batch) {
    src = std::max(src, corpus[static_cast<size_t>(i)].src.size());
    tgt = std::max(tgt, corpus[static_cast<size_t>(i)].tgt.size());
  }
  return static_cast<int64_t>(batch.size() * std::max(src, tgt + 1));
}

std::vector<std::vector<int64_t>> TakeBatches(TokenBatcher& batcher, int64_t count) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(batcher.Next());
  return out;
}

// Pins the generator to the reference splitmix64.c outputs for seed 0.
TEST(SplitMix64Test, MatchesReferenceOutputs) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
}

TEST(SplitMix64Test, UniformBelowStaysInRangeAndHitsEveryValue) {
  SplitMix64 rng(42);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t x = rng.UniformBelow(7);
    ASSERT_LT(x, 7u);
    ++hits[x];
  }
  for (int h : hits) EXPECT_GT(h, 800);
  EXPECT_EQ(rng.UniformBelow(1), 0u);
}

TEST(TokenBatcherTest, EveryBatchRespectsTokenBound) {
  const auto corpus = MakeCorpus(500, 3);
  const TokenBatcher batcher(&corpus, Options(256));
  ASSERT_GT(batcher.batches_per_epoch(), 10);
  for (const auto& batch : batcher.batches()) {
    ASSERT_FALSE(batch.empty());
    EXPECT_LE(PaddedTokens(corpus, batch), 256);
  }
}

TEST(TokenBatcherTest, PacksGreedilyInLengthOrder) {
  // Each example costs max(4, 3 + 1) = 4 tokens per sentence: 3 fit under 12, the 4th not.
  const std::vector<TokenizedExample> corpus(7, Example(4, 3));
  const TokenBatcher batcher(&corpus, Options(12));
  EXPECT_THAT(batcher.batches(),
              ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5), ElementsAre(6)));
}

TEST(TokenBatcherTest, SortsStablyBySourceThenTargetLength) {
  const std::vector<TokenizedExample> corpus = {Example(5, 2), Example(3, 9), Example(5, 1),
                                                Example(3, 9), Example(1, 1)};
  const TokenBatcher batcher(&corpus, Options(1000));
  ASSERT_EQ(batcher.batches_per_epoch(), 1);
  EXPECT_THAT(batcher.batches()[0], ElementsAre(4, 1, 3, 2, 0));

  // Enough ties that an unstable sort (introsort past 16 elements) would reorder them.
  std::vector<TokenizedExample> ties;
  for (int i = 0; i < 300; ++i) ties.push_back(Example(1 + (i * 7) % 3, 1 + (i * 5) % 2));
  const TokenBatcher tied(&ties, Options(1 << 20));
  ASSERT_EQ(tied.batches_per_epoch(), 1);
  const std::vector<int64_t>& order = tied.batches()[0];
  ASSERT_EQ(order.size(), ties.size());
  for (size_t k = 1; k < order.size(); ++k) {
    const TokenizedExample& x = ties[static_cast<size_t>(order[k - 1])];
    const TokenizedExample& y = ties[static_cast<size_t>(order[k])];
    const auto key_x = std::make_pair(x.src.size(), x.tgt.size());
    const auto key_y = std::make_pair(y.src.size(), y.tgt.size());
    ASSERT_LE(key_x, key_y) << "position " << k;
    if (key_x == key_y) {
      EXPECT_LT(order[k - 1], order[k]) << "position " << k;
    }
  }
}

TEST(TokenBatcherTest, OversizeExampleFormsItsOwnBatch) {
  const std::vector<TokenizedExample> corpus = {Example(2, 2), Example(50, 2), Example(2, 1)};
  const TokenBatcher batcher(&corpus, Options(10));
  EXPECT_THAT(batcher.batches(), ElementsAre(ElementsAre(2, 0), ElementsAre(1)));
}

TEST(TokenBatcherTest, RespectsMaxSentences) {
  const auto corpus = MakeCorpus(100, 4);
  TokenBatcherOptions options = Options(1 << 20);
  options.max_sentences = 16;
  const TokenBatcher batcher(&corpus, options);
  EXPECT_EQ(batcher.batches_per_epoch(), 7);  // ceil(100 / 16).
  for (const auto& batch : batcher.batches()) EXPECT_LE(batch.size(), 16u);
}

TEST(TokenBatcherTest, EveryExampleAppearsOncePerEpoch) {
  const auto corpus = MakeCorpus(300, 5);
  TokenBatcher batcher(&corpus, Options(200));
  const int64_t n = batcher.batches_per_epoch();
  std::vector<int64_t> expected(corpus.size());
  std::iota(expected.begin(), expected.end(), int64_t{0});
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(batcher.cursor(), (BatchCursor{epoch, 0}));
    std::vector<int64_t> seen;
    for (const auto& batch : TakeBatches(batcher, n)) {
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, expected) << "epoch " << epoch;
  }
  EXPECT_EQ(batcher.cursor(), (BatchCursor{3, 0}));
}

TEST(TokenBatcherTest, EpochsAndSeedsGiveDifferentOrders) {
  const auto corpus = MakeCorpus(400, 6);
  TokenBatcher a(&corpus, Options(128, 1));
  TokenBatcher b(&corpus, Options(128, 1));
  TokenBatcher c(&corpus, Options(128, 2));
  const int64_t n = a.batches_per_epoch();
  ASSERT_GT(n, 20);
  const auto a0 = TakeBatches(a, n);
  const auto a1 = TakeBatches(a, n);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, a.batches());  // Shuffled, not length order.
  EXPECT_EQ(TakeBatches(b, n), a0);
  EXPECT_EQ(TakeBatches(b, n), a1);
  EXPECT_NE(TakeBatches(c, n), a0);
}

TEST(TokenBatcherTest, GoldenShuffleOrderIsStable) {
  // Ten singleton batches, so the epoch order is the permutation itself. Pins Fisher-Yates
  // over splitmix64 so a checkpoint resumes into the same order on any platform.
  const std::vector<TokenizedExample> corpus(10, Example(5, 5));
  TokenBatcher batcher(&corpus, Options(1, 1));
  std::vector<int64_t> order;
  for (const auto& batch : TakeBatches(batcher, 10)) order.push_back(batch.at(0));
  EXPECT_THAT(order, ElementsAre(1, 7, 5, 6, 2, 0, 4, 8, 3, 9));
}

TEST(TokenBatcherTest, SeekReproducesTheSequenceOfNext) {
  const auto corpus = MakeCorpus(200, 7);
  TokenBatcher original(&corpus, Options(150));
  const int64_t n = original.batches_per_epoch();
  std::vector<BatchCursor> cursors;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < 2 * n + n / 2; ++i) {
    cursors.push_back(original.cursor());
    batches.push_back(original.Next());
  }
  // A fresh batcher (as after a restart) and the same batcher going backwards both agree.
  TokenBatcher resumed(&corpus, Options(150));
  for (size_t k = cursors.size(); k-- > 0;) {
    resumed.Seek(cursors[k]);
    EXPECT_EQ(resumed.Next(), batches[k]) << "step " << k;
    original.Seek(cursors[k]);
    EXPECT_EQ(original.Next(), batches[k]) << "step " << k;
  }
  // Resuming mid-epoch continues with the rest of the recorded sequence.
  resumed.Seek(cursors[n + 3]);
  for (size_t k = n + 3; k < batches.size(); ++k) EXPECT_EQ(resumed.Next(), batches[k]);
}

TEST(TokenBatcherTest, SeekClampsOutOfRangeCursor) {
  const auto corpus = MakeCorpus(100, 8);
  TokenBatcher batcher(&corpus, Options(100));
  const int64_t n = batcher.batches_per_epoch();
  batcher.Seek({2, n + 50});
  EXPECT_EQ(batcher.cursor(), (BatchCursor{2, n}));
  const auto wrapped = batcher.Next();  // The epoch's end wraps into epoch 3.
  batcher.Seek({3, 0});
  EXPECT_EQ(batcher.Next(), wrapped);

  batcher.Seek({-4, -1});
  EXPECT_EQ(batcher.cursor(), (BatchCursor{0, 0}));
}

TEST(TokenBatcherTest, NoShuffleWalksLengthOrderEveryEpoch) {
  const auto corpus = MakeCorpus(150, 9);
  TokenBatcher batcher(&corpus, Options(120, 1, /*shuffle=*/false));
  const int64_t n = batcher.batches_per_epoch();
  EXPECT_EQ(TakeBatches(batcher, n), batcher.batches());
  EXPECT_EQ(TakeBatches(batcher, n), batcher.batches());
  // Length order: the padded width never decreases from one batch to the next.
  int64_t previous_src = 0;
  for (const auto& batch : batcher.batches()) {
    const int64_t src = static_cast<int64_t>(corpus[static_cast<size_t>(batch[0])].src.size());
    EXPECT_GE(src, previous_src);
    previous_src = src;
  }
}

TEST(TokenBatcherTest, EmptyCorpusHasNoBatchesAndNextReturnsEmpty) {
  const std::vector<TokenizedExample> corpus;
  TokenBatcher batcher(&corpus, Options(100));
  EXPECT_EQ(batcher.batches_per_epoch(), 0);
  EXPECT_THAT(batcher.Next(), IsEmpty());
  EXPECT_EQ(batcher.cursor(), (BatchCursor{0, 0}));
  batcher.Seek({5, 3});
  EXPECT_EQ(batcher.cursor(), (BatchCursor{5, 0}));
  EXPECT_THAT(batcher.Next(), IsEmpty());
}

}  // namespace
}  // namespace deepnet::data
