#include "train/training_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/random_token_task.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/synthetic_task.h"
#include "data/token_shard.h"
#include "storage/folder_entry.h"
#include "storage/guarded_read.h"

namespace deepnet::train {
namespace {

// shards.json lists a few hundred bytes per shard; far more is not an index.
constexpr size_t kMaxShardIndexBytes = 16 << 20;

using PairKey = std::pair<std::string, std::string>;

// The generated multilingual task; validated with the rest of the job
// (job::ValidateSyntheticData).
std::vector<data::ParallelExample> SyntheticText(const job::SyntheticDataConfig& config) {
  data::SyntheticTaskOptions options;
  options.languages = config.languages;
  options.pairs_per_language = config.pairs_per_language;
  options.min_words = config.min_words;
  options.max_words = config.max_words;
  options.seed = config.seed;
  return data::GenerateSyntheticCorpus(options);
}

// The random-token task; validated with the rest of the job (job::ValidateRandomTokens).
std::vector<data::ParallelExample> RandomTokensText(const job::RandomTokensConfig& r) {
  data::RandomTokenTaskOptions options;
  options.vocab_size = r.vocab_size;
  options.pairs = r.pairs;
  options.min_len = r.min_len;
  options.max_len = r.max_len;
  options.target = job::ToString(r.target);
  options.seed = r.seed;
  return data::GenerateRandomTokenCorpus(options);
}

absl::Status ReadTsvText(const job::DataConfig& config, std::vector<data::ParallelExample>* train,
                         std::vector<data::ParallelExample>* valid) {
  auto corpus = data::ReadTsvCorpus(config.train_path, config.src_lang, config.tgt_lang);
  if (!corpus.ok()) return corpus.status();
  *train = *std::move(corpus);
  if (!config.valid_path.empty()) {
    auto v = data::ReadTsvCorpus(config.valid_path, config.src_lang, config.tgt_lang);
    if (!v.ok()) return v.status();
    *valid = *std::move(v);
  }
  return absl::OkStatus();
}

// Reads the untokenized train/valid text of a synthetic, random-token or TSV job.
absl::Status ReadText(const job::DataConfig& config, std::vector<data::ParallelExample>* train,
                      std::vector<data::ParallelExample>* valid) {
  switch (config.source) {
    case job::DataSource::kSynthetic:
      *train = SyntheticText(config.synthetic);
      break;
    case job::DataSource::kRandomTokens:
      *train = RandomTokensText(config.random_tokens);
      break;
    case job::DataSource::kTsv:
      if (absl::Status s = ReadTsvText(config, train, valid); !s.ok()) return s;
      break;
    case job::DataSource::kShards:  // Binarised, not text: LoadShards reads them.
      return absl::InternalError("data.source: shards are not read as text");
  }
  if (train->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: the training corpus is empty",
                     config.source == job::DataSource::kTsv ? " (" + config.train_path + ")" : ""));
  }
  if (config.valid_path.empty()) {
    std::vector<data::ParallelExample> kept;
    for (auto& ex : *train) {
      (InValidationSplit(ex.src, config.valid_fraction) ? *valid : kept).push_back(std::move(ex));
    }
    *train = std::move(kept);
  }
  return absl::OkStatus();
}

// Drops examples longer than max_len (0: no limit); returns how many were dropped.
int64_t DropLong(std::vector<data::TokenizedExample>* examples, int64_t max_len) {
  if (max_len <= 0) return 0;
  const size_t before = examples->size();
  examples->erase(std::remove_if(examples->begin(), examples->end(),
                                 [&](const data::TokenizedExample& ex) {
                                   return static_cast<int64_t>(ex.src.size()) > max_len ||
                                          static_cast<int64_t>(ex.tgt.size()) > max_len;
                                 }),
                  examples->end());
  return static_cast<int64_t>(before - examples->size());
}

// source: shards — the folder `deepnet data prepare` wrote: shards.json, spm.model, *.bin.
absl::StatusOr<TrainingData> LoadShards(const job::DataConfig& config) {
  namespace fs = std::filesystem;
  const fs::path dir(config.shard_dir);
  const std::string index_path = (dir / "shards.json").string();
  absl::StatusOr<std::string> text = storage::ReadGuardedFile(index_path, kMaxShardIndexBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("data.shard_dir: ", text.status().message()));
  }
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(*text);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", e.what()));
  }
  if (!index.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": not a JSON object"));
  }
  // Every file shards.json names must be in the shard folder (storage/folder_entry.h).
  const std::string where = absl::StrCat("data.shard_dir: ", index_path);
  TrainingData out;
  out.tokenizer_kind = "sentencepiece";
  try {
    absl::StatusOr<std::string> model =
        storage::FileInFolder(dir.string(), index.value("tokenizer", "spm.model"), where);
    if (!model.ok()) return model.status();
    out.tokenizer_model_path = *std::move(model);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": tokenizer: ", e.what()));
  }
  auto spm = data::SentencePieceTokenizer::Load(out.tokenizer_model_path);
  if (!spm.ok()) return spm.status();
  const std::string fingerprint = index.value("fingerprint", "");
  if ((*spm)->ModelFingerprint() != fingerprint) {
    return absl::FailedPreconditionError(
        absl::StrCat(out.tokenizer_model_path, " does not match ", index_path, " (fingerprint ",
                     (*spm)->ModelFingerprint(), " vs ", fingerprint, ")"));
  }
  const int32_t vocab = (*spm)->vocab_size();
  out.languages = (*spm)->Languages();
  std::map<PairKey, LanguagePair> pairs;
  try {
    for (const auto& shard : index.at("shards")) {
      const std::string split = shard.at("split").get<std::string>();
      if (split != "train" && split != "valid") continue;
      absl::StatusOr<std::string> path =
          storage::FileInFolder(dir.string(), shard.at("file").get<std::string>(), where);
      if (!path.ok()) return path.status();
      auto opened = data::TokenShard::Open(*path, vocab, fingerprint);
      if (!opened.ok()) return opened.status();
      const PairKey key{shard.at("src_lang").get<std::string>(),
                        shard.at("tgt_lang").get<std::string>()};
      LanguagePair& pair = pairs[key];
      pair.src_lang = key.first;
      pair.tgt_lang = key.second;
      auto& examples = split == "train" ? pair.train : pair.valid;
      examples = opened->ReadAll();
      out.dropped += DropLong(&examples, config.max_len);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", e.what()));
  }
  for (auto& [key, pair] : pairs) {
    if (!pair.train.empty()) out.pairs.push_back(std::move(pair));
  }
  if (out.pairs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.shard_dir: ", index_path, " lists no non-empty training shard"));
  }
  out.tokenizer = *std::move(spm);
  return out;
}

}  // namespace

int64_t TrainingData::train_examples() const {
  int64_t n = 0;
  for (const auto& p : pairs) n += static_cast<int64_t>(p.train.size());
  return n;
}

int64_t TrainingData::valid_examples() const {
  int64_t n = 0;
  for (const auto& p : pairs) n += static_cast<int64_t>(p.valid.size());
  return n;
}

absl::StatusOr<std::unique_ptr<data::Tokenizer>> MakeTokenizer(
    const std::string& kind, const std::vector<std::string>& languages,
    const job::DataConfig* data) {
  if (kind == "byte") return std::make_unique<data::ByteTokenizer>(languages);
  if (kind == "random_tokens") {
    if (data == nullptr) {
      return absl::InvalidArgumentError(
          "tokenizer random_tokens needs the job's data.random_tokens section");
    }
    if (auto status = job::ValidateRandomTokens(data->random_tokens); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("data.random_tokens.", status.message()));
    }
    return std::make_unique<data::RandomTokenTokenizer>(data->random_tokens.vocab_size, languages);
  }
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

absl::StatusOr<TrainingData> LoadTrainingData(const job::DataConfig& config) {
  if (config.source == job::DataSource::kShards) return LoadShards(config);
  std::vector<data::ParallelExample> train_text, valid_text;
  if (auto status = ReadText(config, &train_text, &valid_text); !status.ok()) return status;

  std::set<std::string> langs;
  std::map<PairKey,
           std::pair<std::vector<data::ParallelExample>, std::vector<data::ParallelExample>>>
      by_pair;
  for (auto& ex : train_text) {
    langs.insert(ex.tgt_lang);
    by_pair[{ex.src_lang, ex.tgt_lang}].first.push_back(std::move(ex));
  }
  for (auto& ex : valid_text) {
    langs.insert(ex.tgt_lang);
    by_pair[{ex.src_lang, ex.tgt_lang}].second.push_back(std::move(ex));
  }
  TrainingData out;
  // The random-token task brings its own symbol vocabulary; data.tokenizer does not apply.
  out.tokenizer_kind = config.source == job::DataSource::kRandomTokens
                           ? "random_tokens"
                           : job::ToString(config.tokenizer);
  out.languages.assign(langs.begin(), langs.end());
  auto tokenizer = MakeTokenizer(out.tokenizer_kind, out.languages, &config);
  if (!tokenizer.ok()) return tokenizer.status();
  out.tokenizer = *std::move(tokenizer);
  for (auto& [key, texts] : by_pair) {
    LanguagePair pair{key.first, key.second, {}, {}};
    int64_t dropped_train = 0, dropped_valid = 0;
    pair.train = data::TokenizeCorpus(texts.first, *out.tokenizer, config.max_len, &dropped_train);
    pair.valid = data::TokenizeCorpus(texts.second, *out.tokenizer, config.max_len, &dropped_valid);
    out.dropped += dropped_train + dropped_valid;
    // A pair seen only in validation cannot be sampled for training.
    if (!pair.train.empty()) out.pairs.push_back(std::move(pair));
  }
  if (out.pairs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.max_len: every training pair is longer than ", config.max_len, " tokens"));
  }
  return out;
}

}  // namespace deepnet::train
