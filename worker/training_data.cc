#include "worker/training_data.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/synthetic_task.h"

namespace deepnet::worker {

absl::StatusOr<std::unique_ptr<data::Tokenizer>> MakeTokenizer(
    const std::string& kind, const std::vector<std::string>& languages) {
  if (kind == "byte") return std::make_unique<data::ByteTokenizer>(languages);
  return absl::InvalidArgumentError(
      absl::StrCat("data.tokenizer: unknown tokenizer '", kind, "' (allowed: byte)"));
}

bool InValidationSplit(const std::string& source, double valid_fraction) {
  if (valid_fraction <= 0.0) return false;
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64: stable across machines.
  for (unsigned char c : source) h = (h ^ c) * 1099511628211ULL;
  h ^= h >> 33;
  return static_cast<double>(h % 1000000) < valid_fraction * 1000000.0;
}

absl::StatusOr<TrainingData> LoadTrainingData(const DataConfig& config) {
  std::vector<data::ParallelExample> train_text, valid_text;
  if (config.source == "synthetic") {
    if (auto status = data::ValidateSyntheticTask(config.synthetic); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("data.synthetic.", status.message()));
    }
    train_text = data::GenerateSyntheticCorpus(config.synthetic);
  } else if (config.source == "tsv") {
    auto corpus = data::ReadTsvCorpus(config.train_path, config.src_lang, config.tgt_lang);
    if (!corpus.ok()) return corpus.status();
    train_text = *std::move(corpus);
    if (!config.valid_path.empty()) {
      auto valid = data::ReadTsvCorpus(config.valid_path, config.src_lang, config.tgt_lang);
      if (!valid.ok()) return valid.status();
      valid_text = *std::move(valid);
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("data.source: unknown source '", config.source, "' (allowed: synthetic, tsv)"));
  }
  if (train_text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data: the training corpus is empty", config.source == "tsv" ? " (" + config.train_path + ")" : ""));
  }
  if (config.valid_path.empty()) {
    std::vector<data::ParallelExample> kept;
    for (auto& ex : train_text) {
      (InValidationSplit(ex.src, config.valid_fraction) ? valid_text : kept).push_back(std::move(ex));
    }
    train_text = std::move(kept);
  }

  std::set<std::string> langs;
  for (const auto& ex : train_text) langs.insert(ex.tgt_lang);
  for (const auto& ex : valid_text) langs.insert(ex.tgt_lang);
  TrainingData out;
  out.languages.assign(langs.begin(), langs.end());
  auto tokenizer = MakeTokenizer(config.tokenizer, out.languages);
  if (!tokenizer.ok()) return tokenizer.status();
  out.tokenizer = *std::move(tokenizer);
  int64_t dropped_train = 0, dropped_valid = 0;
  out.train = data::TokenizeCorpus(train_text, *out.tokenizer, config.max_len, &dropped_train);
  out.valid = data::TokenizeCorpus(valid_text, *out.tokenizer, config.max_len, &dropped_valid);
  out.dropped = dropped_train + dropped_valid;
  if (out.train.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.max_len: every training pair is longer than ", config.max_len, " tokens"));
  }
  out.valid_text = std::move(valid_text);
  return out;
}

}  // namespace deepnet::worker
