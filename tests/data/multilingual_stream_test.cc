#include "data/multilingual_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>

namespace deepnet::data {
namespace {

std::vector<TokenizedExample> Pair(int n, int32_t base) {
  std::vector<TokenizedExample> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({std::vector<int32_t>(1 + i % 7, base), std::vector<int32_t>(1 + i % 5, base)});
  }
  return out;
}

MultilingualStreamOptions Options(int64_t rank = 0, int64_t world = 1) {
  MultilingualStreamOptions o;
  o.temperature = 5.0;
  o.seed = 17;
  o.batching.max_tokens = 24;
  o.rank = rank;
  o.world = world;
  return o;
}

class MultilingualStreamTest : public ::testing::Test {
 protected:
  std::vector<TokenizedExample> big_ = Pair(2000, 10), mid_ = Pair(300, 20), small_ = Pair(20, 30);
  std::vector<const std::vector<TokenizedExample>*> pairs_ = {&big_, &mid_, &small_};
};

TEST(TemperatureTest, MatchesFormula) {
  auto p = TemperatureProbabilities({1000, 10}, 5.0);
  const double a = std::pow(1000.0 / 1010, 0.2), b = std::pow(10.0 / 1010, 0.2);
  EXPECT_NEAR(p[0], a / (a + b), 1e-12);
  EXPECT_NEAR(p[1], b / (a + b), 1e-12);
  auto proportional = TemperatureProbabilities({300, 100}, 1.0);
  EXPECT_NEAR(proportional[0], 0.75, 1e-12);
}

TEST_F(MultilingualStreamTest, DrawsPairsWithTemperatureProbabilities) {
  MultilingualBatchStream stream(pairs_, Options());
  std::map<int64_t, int> counts;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++counts[stream.Next().pair];
  for (int64_t p = 0; p < 3; ++p) {
    EXPECT_NEAR(counts[p] / double(draws), stream.probabilities()[p], 0.015) << "pair " << p;
  }
  // T = 5 upsamples the 20-pair language far above its 0.9 % share of the data.
  EXPECT_GT(stream.probabilities()[2], 0.15);
}

TEST_F(MultilingualStreamTest, SameSeedSameSequenceAndBatchesRespectTheBound) {
  MultilingualBatchStream a(pairs_, Options()), b(pairs_, Options());
  for (int i = 0; i < 500; ++i) {
    StreamBatch x = a.Next(), y = b.Next();
    ASSERT_EQ(x.pair, y.pair);
    ASSERT_EQ(x.indices, y.indices);
    ASSERT_EQ(x.position, i);
    const auto& examples = *pairs_[x.pair];
    size_t longest = 0;
    for (int64_t idx : x.indices) {
      longest = std::max({longest, examples[idx].src.size(), examples[idx].tgt.size() + 1});
    }
    if (x.indices.size() > 1) {
      EXPECT_LE(x.indices.size() * longest, 24u);
    }
  }
}

TEST_F(MultilingualStreamTest, RanksPartitionTheGlobalSequence) {
  MultilingualBatchStream single(pairs_, Options());
  std::vector<StreamBatch> global;
  for (int i = 0; i < 300; ++i) global.push_back(single.Next());
  for (int64_t world : {2, 3}) {
    std::set<int64_t> seen;
    for (int64_t rank = 0; rank < world; ++rank) {
      MultilingualBatchStream stream(pairs_, Options(rank, world));
      for (int i = 0; i < 300 / world; ++i) {
        StreamBatch b = stream.Next();
        ASSERT_EQ(b.position % world, rank);
        ASSERT_EQ(b.pair, global[b.position].pair);
        ASSERT_EQ(b.indices, global[b.position].indices);
        ASSERT_TRUE(seen.insert(b.position).second);
      }
    }
    EXPECT_EQ(seen.size(), 300u);
  }
}

TEST_F(MultilingualStreamTest, ResumingWithAnotherNumberOfRanksNeitherRepeatsNorSkips) {
  MultilingualBatchStream single(pairs_, Options());
  for (int i = 0; i < 137; ++i) single.Next();
  const StreamState saved = single.state();
  std::vector<StreamBatch> expected;
  for (int i = 0; i < 60; ++i) expected.push_back(single.Next());

  // Resume the saved state on two ranks.
  std::map<int64_t, StreamBatch> got;
  for (int64_t rank = 0; rank < 2; ++rank) {
    MultilingualBatchStream stream(pairs_, Options(rank, 2));
    ASSERT_TRUE(stream.Restore(saved).ok());
    for (int i = 0; i < 30; ++i) {
      StreamBatch b = stream.Next();
      got[b.position] = b;
    }
  }
  ASSERT_EQ(got.size(), 60u);
  for (const auto& e : expected) {
    ASSERT_TRUE(got.count(e.position)) << e.position;
    EXPECT_EQ(got[e.position].indices, e.indices);
    EXPECT_EQ(got[e.position].pair, e.pair);
  }
}

TEST_F(MultilingualStreamTest, EveryRankHasTheSameStateAfterEachBatch) {
  for (int64_t world : {2, 3}) {
    std::vector<std::unique_ptr<MultilingualBatchStream>> ranks;
    for (int64_t rank = 0; rank < world; ++rank) {
      ranks.push_back(std::make_unique<MultilingualBatchStream>(pairs_, Options(rank, world)));
    }
    for (int i = 0; i < 40; ++i) {
      for (auto& stream : ranks) stream->Next();
      const StreamState first = ranks.front()->state();
      EXPECT_EQ(first.position, (i + 1) * world);
      for (auto& stream : ranks) {
        const StreamState s = stream->state();
        ASSERT_EQ(s.position, first.position);
        for (size_t p = 0; p < s.pair_cursors.size(); ++p) {
          ASSERT_EQ(s.pair_cursors[p].epoch, first.pair_cursors[p].epoch);
          ASSERT_EQ(s.pair_cursors[p].batch, first.pair_cursors[p].batch);
        }
      }
    }
  }
}

TEST_F(MultilingualStreamTest, StateSavedByTwoRanksResumesOnThree) {
  MultilingualBatchStream single(pairs_, Options());
  std::vector<StreamBatch> global;
  for (int i = 0; i < 100; ++i) global.push_back(single.Next());
  MultilingualBatchStream rank1(pairs_, Options(1, 2));
  for (int i = 0; i < 7; ++i) rank1.Next();  // 14 global batches consumed by two ranks.
  const StreamState saved = rank1.state();
  ASSERT_EQ(saved.position, 14);
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < 3; ++rank) {
    MultilingualBatchStream stream(pairs_, Options(rank, 3));
    ASSERT_TRUE(stream.Restore(saved).ok());
    for (int i = 0; i < 10; ++i) {
      StreamBatch b = stream.Next();
      EXPECT_EQ(b.indices, global[b.position].indices);
      EXPECT_TRUE(seen.insert(b.position).second);
    }
  }
  EXPECT_EQ(*seen.begin(), 14);
  EXPECT_EQ(*seen.rbegin(), 43);
}

TEST_F(MultilingualStreamTest, RestoreRejectsAnotherNumberOfPairs) {
  MultilingualBatchStream stream(pairs_, Options());
  StreamState state = stream.state();
  state.pair_cursors.pop_back();
  EXPECT_FALSE(stream.Restore(state).ok());
}

}  // namespace
}  // namespace deepnet::data
