#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "data/parallel_corpus.h"

namespace deepnet::train {

/// One training batch as padded tensors (right padding).
struct BatchTensors {
  torch::Tensor src;      // [B, S] `<2xx> tokens EOS`
  torch::Tensor tgt_in;   // [B, T] `BOS tokens`
  torch::Tensor tgt_out;  // [B, T] `tokens EOS`
  int64_t src_tokens = 0;  // Non-padding source tokens.
  int64_t tgt_tokens = 0;  // Non-padding target tokens (what the loss counts).
};

struct SpecialIds {
  int64_t pad = 0;
  int64_t bos = 1;
};

/// The one place where data/'s token ids become tensors (STYLE.md §1).
BatchTensors MakeBatch(const std::vector<data::TokenizedExample>& examples,
                       const std::vector<int64_t>& indices, const SpecialIds& ids,
                       const torch::Device& device);

}  // namespace deepnet::train
