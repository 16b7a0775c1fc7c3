#include "train/batch_prefetcher.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace deepnet::train {
namespace {

std::vector<data::TokenizedExample> Examples(int n) {
  std::vector<data::TokenizedExample> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({std::vector<int32_t>(2 + i % 9, 10 + i), std::vector<int32_t>(1 + i % 4, 7)});
  }
  return out;
}

data::MultilingualStreamOptions Options() {
  data::MultilingualStreamOptions o;
  o.seed = 5;
  o.batching.max_tokens = 40;
  return o;
}

TEST(BatchPrefetcherTest, YieldsTheStreamsBatchesInOrderWithTheirStates) {
  auto a = Examples(300), b = Examples(50);
  std::vector<const std::vector<data::TokenizedExample>*> pairs = {&a, &b};
  data::MultilingualBatchStream reference(pairs, Options());
  data::MultilingualBatchStream stream(pairs, Options());
  BatchPrefetcher prefetcher(&stream, pairs, SpecialIds{0, 1}, 3);
  prefetcher.Start();
  for (int i = 0; i < 200; ++i) {
    data::StreamBatch expected = reference.Next();
    BatchTensors tensors = MakeBatch(*pairs[expected.pair], expected.indices, {0, 1}, torch::kCPU);
    double waited = -1;
    PreparedBatch got = prefetcher.Pop(&waited);
    EXPECT_GE(waited, 0.0);
    ASSERT_EQ(got.pair, expected.pair) << i;
    ASSERT_TRUE(torch::equal(got.tensors.src, tensors.src)) << i;
    ASSERT_TRUE(torch::equal(got.tensors.tgt_out, tensors.tgt_out)) << i;
    EXPECT_EQ(got.state_after.position, reference.state().position);
  }
}

TEST(BatchPrefetcherTest, DestructionWithAFullQueueDoesNotHang) {
  auto a = Examples(100);
  std::vector<const std::vector<data::TokenizedExample>*> pairs = {&a};
  data::MultilingualBatchStream stream(pairs, Options());
  {
    BatchPrefetcher prefetcher(&stream, pairs, SpecialIds{0, 1}, 2);
    prefetcher.Start();
    double waited = 0;
    prefetcher.Pop(&waited);
  }  // The loader is blocked on a full queue here; the destructor must wake and join it.
  SUCCEED();
}

}  // namespace
}  // namespace deepnet::train
