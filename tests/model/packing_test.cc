// Sequence packing's masks and positions (model/packing.h).
#include "model/packing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace deepnet::model {
namespace {

torch::Tensor Ids(std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return torch::tensor(values, torch::kLong).view({1, n});
}

TEST(PackingTest, PositionsRestartAtEveryPair) {
  const torch::Tensor segments = torch::cat({Ids({1, 1, 1, 2, 2, 3, 0, 0}),  //
                                             Ids({1, 1, 1, 1, 1, 1, 1, 1})});
  const torch::Tensor expected = torch::cat({Ids({0, 1, 2, 0, 1, 0, 0, 1}),  //
                                             Ids({0, 1, 2, 3, 4, 5, 6, 7})});
  EXPECT_TRUE(torch::equal(SegmentPositions(segments), expected)) << SegmentPositions(segments);
}

TEST(PackingTest, QueriesSeeOnlyTheKeysOfTheirOwnPair) {
  const torch::Tensor target = Ids({1, 1, 2, 0});
  const torch::Tensor source = Ids({1, 2, 2, 2, 0});
  const torch::Tensor hidden = SegmentHidden(target, source);
  ASSERT_EQ(hidden.sizes(), (std::vector<int64_t>{1, 4, 5}));
  const torch::Tensor sees = hidden.logical_not().to(torch::kLong)[0];
  const torch::Tensor expected = torch::tensor({1, 0, 0, 0, 0,  //
                                                1, 0, 0, 0, 0,  //
                                                0, 1, 1, 1, 0,  //
                                                0, 0, 0, 0, 0},  // padding sees nothing
                                               torch::kLong)
                                     .view({4, 5});
  EXPECT_TRUE(torch::equal(sees, expected)) << sees;
}

TEST(PackingTest, LayoutHasWhatEachSideNeeds) {
  const PackedLayout both = LayoutOfPacked(Ids({1, 1, 2}), Ids({1, 2, 2, 0}));
  EXPECT_EQ(both.encoder_mask.sizes(), (std::vector<int64_t>{1, 3, 3}));
  EXPECT_EQ(both.cross_mask.sizes(), (std::vector<int64_t>{1, 4, 3}));
  EXPECT_EQ(both.decoder_mask.sizes(), (std::vector<int64_t>{1, 4, 4}));
  EXPECT_TRUE(torch::equal(both.target_positions, Ids({0, 0, 1, 0})));
  const PackedLayout decoder_only = LayoutOfPacked(torch::Tensor(), Ids({1, 2}));
  EXPECT_FALSE(decoder_only.encoder_mask.defined());
  EXPECT_FALSE(decoder_only.cross_mask.defined());
  EXPECT_TRUE(decoder_only.decoder_mask.defined());
}

TEST(PackingTest, RejectsIdsOfTheWrongRank) {
  EXPECT_THROW(SegmentPositions(torch::zeros({3}, torch::kLong)), c10::Error);
  EXPECT_THROW(SegmentHidden(Ids({1}), torch::zeros({2, 1}, torch::kLong)), c10::Error);
}

}  // namespace
}  // namespace deepnet::model
