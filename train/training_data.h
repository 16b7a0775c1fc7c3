#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/parallel_corpus.h"
#include "data/tokenizer.h"
#include "job/job_config.h"

namespace deepnet::train {

/// The tokenized examples of one translation direction.
struct LanguagePair {
  std::string src_lang;
  std::string tgt_lang;
  std::vector<data::TokenizedExample> train;
  std::vector<data::TokenizedExample> valid;
};

/// The tokenized training and validation sets of a job, by language pair, with the tokenizer.
struct TrainingData {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string tokenizer_kind;          // "byte", "sentencepiece" or "random_tokens".
  std::string tokenizer_model_path;    // SentencePiece model file; empty for "byte".
  std::vector<std::string> languages;  // Target languages (tags), in tag order.
  std::vector<LanguagePair> pairs;     // Sorted by (src_lang, tgt_lang).
  int64_t dropped = 0;                 // Pairs over data.max_len.

  int64_t train_examples() const;
  int64_t valid_examples() const;
};

/// Makes a tokenizer of `kind` ("byte", or "random_tokens", which reads its symbol count from
/// `data->random_tokens` and fails with a clear error without it) for `languages`.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> MakeTokenizer(
    const std::string& kind, const std::vector<std::string>& languages,
    const job::DataConfig* data = nullptr);

/// Reads or generates the corpus the config names, splits off validation pairs (by a hash of
/// the source sentence, so a source never lands in both splits and the split is the same on
/// every machine), groups it by language pair and tokenizes it. Errors name the config field
/// or the file.
absl::StatusOr<TrainingData> LoadTrainingData(const job::DataConfig& config);

/// True when a pair with this source text belongs to the validation split.
bool InValidationSplit(const std::string& source, double valid_fraction);

}  // namespace deepnet::train
