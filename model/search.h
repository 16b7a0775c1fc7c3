#pragma once

#include <cstdint>
#include <vector>

#include "model/deepnet.h"

namespace deepnet::model {

struct SearchOptions {
  // Hypotheses kept per sentence; 1 is greedy-equivalent.
  int64_t beam_size = 4;
  // Finished hypotheses are ranked by score / length^length_penalty (length includes EOS).
  double length_penalty = 1.0;
  // Output length limit: max_len_a * source_length + max_len_b tokens (EOS included), capped
  // by the model's max_positions.
  double max_len_a = 1.5;
  int64_t max_len_b = 10;
  int64_t bos_id = 1;
  int64_t eos_id = 2;
  int64_t pad_id = 0;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // Without BOS and EOS.
  double score = 0.0;           // Sum of token log-probabilities, EOS included.
  double normalized_score = 0.0;
};

/// Greedy decoding of src_tokens [B, S] (right-padded) with an incremental key/value cache.
/// Runs in eval mode without gradients; needs the whole model. One hypothesis per sentence.
std::vector<Hypothesis> GreedySearch(DeepNetImpl& model, const torch::Tensor& src_tokens,
                                     const SearchOptions& options);

/// Beam search with length penalty; returns the best finished hypothesis per sentence.
std::vector<Hypothesis> BeamSearch(DeepNetImpl& model, const torch::Tensor& src_tokens,
                                   const SearchOptions& options);

}  // namespace deepnet::model
