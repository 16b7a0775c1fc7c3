// Sequence packing (data.pack_tokens): PackRows and MakeBatch lay several pairs into one row,
// and a packed batch trains exactly as the same pairs one per row: the same loss and the same
// gradients, through every attention path, both position kinds and layer recomputation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/kernels/fused_kernels.h"
#include "pipeline/stage_compute.h"
#include "train/batch_tensors.h"

namespace deepnet::train {
namespace {

constexpr int64_t kPackPad = 0, kPackBos = 1, kPackVocab = 29;

// Pairs of varied lengths (1..9 source, 1..6 target tokens), ids in [3, kPackVocab).
std::vector<data::TokenizedExample> VariedPairs(int n) {
  std::vector<data::TokenizedExample> out;
  for (int i = 0; i < n; ++i) {
    data::TokenizedExample ex;
    for (int j = 0; j < 1 + (i * 7) % 9; ++j) ex.src.push_back(3 + (i * 5 + j * 3) % (kPackVocab - 3));
    for (int j = 0; j < 1 + (i * 5) % 6; ++j) ex.tgt.push_back(3 + (i * 11 + j) % (kPackVocab - 3));
    out.push_back(ex);
  }
  return out;
}

std::vector<int64_t> AllIndices(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

TEST(BatchPackingTest, EveryPairLandsInOneRowWithinTheRowLength) {
  const auto examples = VariedPairs(40);
  const std::vector<int64_t> indices = AllIndices(examples.size());
  for (int64_t pack : {1, 8, 12, 30}) {
    const auto rows = PackRows(examples, indices, pack);
    std::multiset<int64_t> seen;
    for (const auto& row : rows) {
      int64_t s = 0, t = 0, longest = 0;
      for (int64_t k : row) {
        seen.insert(k);
        s += static_cast<int64_t>(examples[k].src.size());
        t += static_cast<int64_t>(examples[k].tgt.size());
        longest = std::max<int64_t>(
            longest, std::max(examples[k].src.size(), examples[k].tgt.size()));
      }
      ASSERT_FALSE(row.empty());
      // Only a pair longer than the row length has a row to itself beyond it.
      EXPECT_LE(s, std::max(pack, longest)) << pack;
      EXPECT_LE(t, std::max(pack, longest)) << pack;
      if (s > pack || t > pack) {
        EXPECT_EQ(row.size(), 1u) << pack;
      }
    }
    EXPECT_EQ(seen, std::multiset<int64_t>(indices.begin(), indices.end())) << pack;
    if (pack == 30) {
      EXPECT_LE(rows.size(), 40u / 4) << "rows of 30 hold several pairs";
    }
  }
  EXPECT_EQ(PackRows(examples, indices, 12), PackRows(examples, indices, 12));
}

TEST(BatchPackingTest, PackedBatchHoldsEachPairAsItsOwnRowWould) {
  const auto examples = VariedPairs(17);
  std::vector<int64_t> indices = {4, 9, 0, 16, 3, 11, 7, 2, 13};
  const BatchTensors plain = MakeBatch(examples, indices, {kPackPad, kPackBos}, torch::kCPU);
  const BatchTensors packed = MakeBatch(examples, indices, {kPackPad, kPackBos}, torch::kCPU, 16);
  EXPECT_FALSE(plain.src_segments.defined());
  ASSERT_TRUE(packed.src_segments.defined());
  EXPECT_LT(packed.src.size(0), plain.src.size(0));
  EXPECT_EQ(packed.src_tokens, plain.src_tokens);
  EXPECT_EQ(packed.tgt_tokens, plain.tgt_tokens);
  EXPECT_EQ(packed.src.ne(kPackPad).sum().item<int64_t>(), packed.src_tokens);
  EXPECT_EQ(packed.src_segments.ne(0).sum().item<int64_t>(), packed.src_tokens);
  EXPECT_EQ(packed.tgt_segments.ne(0).sum().item<int64_t>(), packed.tgt_tokens);
  // Each pair's tokens, cut out of its packed row by its id, equal its own row.
  const auto rows = PackRows(examples, indices, 16);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t j = 0; j < rows[r].size(); ++j) {
      const int64_t k = rows[r][j], id = static_cast<int64_t>(j) + 1;
      const auto pick = [&](const torch::Tensor& t, const torch::Tensor& ids) {
        return t[r].masked_select(ids[r].eq(id));
      };
      const auto own = [&](const torch::Tensor& t, int64_t n) { return t[k].narrow(0, 0, n); };
      const int64_t sl = static_cast<int64_t>(examples[indices[k]].src.size());
      const int64_t tl = static_cast<int64_t>(examples[indices[k]].tgt.size());
      EXPECT_TRUE(torch::equal(pick(packed.src, packed.src_segments), own(plain.src, sl)));
      EXPECT_TRUE(torch::equal(pick(packed.tgt_in, packed.tgt_segments), own(plain.tgt_in, tl)));
      EXPECT_TRUE(torch::equal(pick(packed.tgt_out, packed.tgt_segments), own(plain.tgt_out, tl)));
    }
  }
}

struct PackingVariant {
  std::string name;
  bool fused = true;
  model::PositionKind positions = model::PositionKind::kSinusoidal;
  model::NormVariant norm = model::NormVariant::kDeepNorm;
  bool recompute = false;
  int64_t encoder_layers = 2;
};

struct PackedStepResult {
  double loss = 0.0;
  std::vector<torch::Tensor> grads;
};

PackedStepResult PackedTrainStep(model::DeepNetImpl* m, const BatchTensors& batch, bool recompute) {
  for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
  const pipeline::MicroBatch mb = ToMicroBatch(batch, torch::kCPU);
  pipeline::StageCompute compute(m, /*segments=*/2, /*label_smoothing=*/0.1, recompute);
  pipeline::LossSums sums;
  compute.Forward(0, mb, {}, 1.0, &sums);
  compute.Backward(0, {});
  sums.Settle();
  PackedStepResult r;
  r.loss = sums.loss;
  for (auto& p : m->parameters()) {
    r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  }
  return r;
}

TEST(BatchPackingTest, PackedBatchTrainsLikeOnePairPerRow) {
  const bool fused_before = model::kernels::FusedKernelsEnabled();
  const auto examples = VariedPairs(23);
  const std::vector<int64_t> indices = AllIndices(examples.size());
  const BatchTensors plain = MakeBatch(examples, indices, {kPackPad, kPackBos}, torch::kCPU);
  const BatchTensors packed = MakeBatch(examples, indices, {kPackPad, kPackBos}, torch::kCPU, 20);
  ASSERT_LT(packed.src.size(0) * 2, plain.src.size(0));
  const std::vector<PackingVariant> variants = {
      {"fused kernels", true},
      {"ATen path", false},
      {"learned positions", true, model::PositionKind::kLearned},
      {"Pre-LN, ATen path", false, model::PositionKind::kSinusoidal, model::NormVariant::kPreLn},
      {"recompute", true, model::PositionKind::kSinusoidal, model::NormVariant::kDeepNorm, true},
      {"decoder-only", true, model::PositionKind::kSinusoidal, model::NormVariant::kDeepNorm,
       false, 0},
  };
  for (const PackingVariant& v : variants) {
    SCOPED_TRACE(v.name);
    model::kernels::SetFusedKernelsEnabled(v.fused);
    const auto config = model::DeepNetConfig()
                            .encoder_layers(v.encoder_layers)
                            .decoder_layers(2)
                            .d_model(16)
                            .heads(2)
                            .ffn_dim(32)
                            .vocab_size(kPackVocab)
                            .pad_id(kPackPad)
                            .dropout(0.0)
                            .max_positions(64)
                            .positions(v.positions)
                            .norm(v.norm);
    model::DeepNet m(config);
    model::InitializeParameters(*m, 7);
    const PackedStepResult a = PackedTrainStep(m.get(), plain, v.recompute);
    const PackedStepResult b = PackedTrainStep(m.get(), packed, v.recompute);
    EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(a.loss));
    ASSERT_EQ(a.grads.size(), b.grads.size());
    const auto names = m->named_parameters().keys();
    for (size_t i = 0; i < a.grads.size(); ++i) {
      EXPECT_TRUE(torch::allclose(a.grads[i], b.grads[i], 1e-4, 1e-6))
          << names[i] << " differs by " << (a.grads[i] - b.grads[i]).abs().max().item<double>();
    }
  }
  model::kernels::SetFusedKernelsEnabled(fused_before);
}

}  // namespace
}  // namespace deepnet::train
