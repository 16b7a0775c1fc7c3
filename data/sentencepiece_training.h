#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace deepnet::data {

/// How to train a SentencePiece model for SentencePieceTokenizer.
struct SentencePieceTrainOptions {
  // Training text per language code ("en" -> English sentences); no language may be empty.
  std::map<std::string, std::vector<std::string>> sentences;
  // Sampling temperature T > 0: language l gets a share proportional to (n_l / N)^(1/T) of the
  // training mix. 1 keeps the natural proportions; larger values upsample low-resource
  // languages toward uniform (multilingual NMT practice, e.g. Arivazhagan et al. 2019).
  double temperature = 5.0;
  // Sentences in the training mix (drawn from `sentences` as above); > 0.
  int64_t training_sentences = 300000;
  // Seeds which sentences are drawn (SplitMix64); the same seed gives the same mix everywhere.
  uint64_t seed = 1;
  // Final vocabulary size, special ids and tags included.
  int32_t vocab_size = 8000;
  // SentencePiece model type: "unigram", "bpe", "char" or "word".
  std::string model_type = "unigram";
  // Share of characters the model must cover, in (0, 1]; rarer characters map to unk.
  double character_coverage = 0.9995;
  // Languages that get a `<2LANG>` tag (a user-defined symbol), given ids 4, 5, ... in this
  // order. Empty means no tags. Codes may not contain ',', '<', '>' or whitespace.
  std::vector<std::string> languages;
  // Output path prefix: training writes <model_prefix>.model and <model_prefix>.vocab, each
  // atomically. The model does not record this path.
  std::string model_prefix;
  // SentencePiece training threads; >= 1. The model depends on it slightly (SentencePiece sums
  // EM statistics per thread), so keep it fixed for reproducible vocabularies.
  int num_threads = 2;
};

/// InvalidArgument naming the first bad field, e.g. "SentencePieceTrainOptions.temperature".
[[nodiscard]] absl::Status Validate(const SentencePieceTrainOptions& options);

/// The training mix for valid `options`: options.training_sentences views into
/// options.sentences (valid while it lives). Language shares are TemperatureProbabilities
/// (data/multilingual_stream.h: the batch stream's rule), apportioned by largest remainder;
/// a language needing more than it has repeats every sentence equally often, then draws the
/// rest without replacement, seeded by (seed, language). Grouped by language in map order.
std::vector<std::string_view> SampleTrainingMix(const SentencePieceTrainOptions& options);

/// Validates, samples the mix and trains with pad/bos/eos/unk ids 0/1/2/3. Blocks for the
/// whole training. Errors name the option or, from SentencePiece, carry its message together
/// with the settings it was given.
[[nodiscard]] absl::Status TrainSentencePiece(const SentencePieceTrainOptions& options);

}  // namespace deepnet::data
