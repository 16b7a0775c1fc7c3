#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/parallel_corpus.h"
#include "data/tokenizer.h"
#include "worker/job_config.h"

namespace deepnet::worker {

/// The tokenized training and validation sets of a job, with their tokenizer.
struct TrainingData {
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<std::string> languages;  // Target languages (tags), sorted.
  std::vector<data::TokenizedExample> train;
  std::vector<data::TokenizedExample> valid;
  std::vector<data::ParallelExample> valid_text;  // Untokenized valid pairs (for decoding).
  int64_t dropped = 0;                            // Pairs over data.max_len.
};

/// Makes a tokenizer of `kind` ("byte") for `languages`.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> MakeTokenizer(
    const std::string& kind, const std::vector<std::string>& languages);

/// Reads or generates the corpus the config names, splits off validation pairs (by a hash of
/// the source sentence, so a source never lands in both splits and the split is the same on
/// every machine) and tokenizes both sets. Errors name the config field or the file.
absl::StatusOr<TrainingData> LoadTrainingData(const DataConfig& config);

/// True when a pair with this source text belongs to the validation split.
bool InValidationSplit(const std::string& source, double valid_fraction);

}  // namespace deepnet::worker
