#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "data/parallel_corpus.h"
#include "pipeline/stage_compute.h"

namespace deepnet::train {

/// One training batch as padded tensors (right padding).
struct BatchTensors {
  torch::Tensor src;      // [B, S] `<2xx> tokens EOS`
  torch::Tensor tgt_in;   // [B, T] `BOS tokens`
  torch::Tensor tgt_out;  // [B, T] `tokens EOS`
  // Packed batches only: segment ids [B, S] and [B, T] int64 (model/packing.h), pair k of a
  // row numbered k on both sides, 0 at padding. Undefined with one pair per row.
  torch::Tensor src_segments;
  torch::Tensor tgt_segments;
  int64_t src_tokens = 0;  // Non-padding source tokens.
  int64_t tgt_tokens = 0;  // Non-padding target tokens (what the loss counts).
};

struct SpecialIds {
  int64_t pad = 0;
  int64_t bos = 1;
};

/// The one place where data/'s token ids become tensors (STYLE.md §1).
/// With `pack_tokens` > 0 (data.pack_tokens) the pairs are packed into rows of up to that
/// many source and target positions (PackRows); otherwise each pair has a row of its own.
BatchTensors MakeBatch(const std::vector<data::TokenizedExample>& examples,
                       const std::vector<int64_t>& indices, const SpecialIds& ids,
                       const torch::Device& device, int64_t pack_tokens = 0);

/// The batch as the engine takes it, its tensors (segment ids included) on `device`.
pipeline::MicroBatch ToMicroBatch(BatchTensors batch, const torch::Device& device);

/// Rows of a packed batch: positions in `indices` of the pairs each row holds, in row order.
/// First fit, longest pair first (ties in batch order): a pair goes to the first row with room
/// for its source and its target within max(pack_tokens, its own length); every pair is in
/// exactly one row, never split. Deterministic.
std::vector<std::vector<int64_t>> PackRows(const std::vector<data::TokenizedExample>& examples,
                                           const std::vector<int64_t>& indices,
                                           int64_t pack_tokens);

}  // namespace deepnet::train
