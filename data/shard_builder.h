#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::data {

/// What BuildShards reads, trains and writes.
struct ShardBuildOptions {
  // Folder with `<split>.<locale>.tsv` files, lines `en<TAB>locale<TAB>English<TAB>translation`.
  std::string input_dir;
  // Folder for spm.model/.vocab, `<split>.<src>-<tgt>.bin` and shards.json; created if missing.
  std::string output_dir;
  // Locales to use; empty means every locale with a `<train_split>.<locale>.tsv` in input_dir.
  std::vector<std::string> locales;
  // Splits to shard; each needs a file for every locale.
  std::vector<std::string> splits = {"train", "valid", "test"};
  // The split SentencePiece is trained on; needs a file for every locale.
  std::string train_split = "train";
  // "en2x" (src English, tag <2locale>), "x2en" (src the locale, tag <2en>) or "both".
  std::string direction = "both";
  // Examples whose source or target exceeds this many tokens (tag and EOS included) are dropped
  // and counted; 0 means no limit.
  int64_t max_len = 256;
  // SentencePiece training, as in SentencePieceTrainOptions. English is one language, "en",
  // counted once however many locale files repeat it; each language's sentences are deduplicated.
  int32_t vocab_size = 8000;
  std::string model_type = "unigram";
  double character_coverage = 0.9995;
  double temperature = 5.0;
  int64_t training_sentences = 300000;
  uint64_t seed = 1;
  // Threads for SentencePiece training and for tokenization; >= 1. Tokenization gives the same
  // shards for any count; the SentencePiece model depends on it slightly (see
  // SentencePieceTrainOptions::num_threads).
  int num_threads = 2;
};

/// One written shard, as listed in shards.json.
struct ShardSummary {
  std::string file;  // Name inside output_dir.
  std::string split;
  std::string src_lang;
  std::string tgt_lang;
  int64_t pairs = 0;       // Examples written.
  int64_t src_tokens = 0;  // Ids on the source side (tags and EOS included).
  int64_t tgt_tokens = 0;
  int64_t dropped = 0;  // Examples over max_len (or without a tag).
};

/// The result of BuildShards: shards.json's content plus timings (not written to the file, so
/// the same inputs always give byte-identical outputs).
struct ShardSetSummary {
  int32_t vocab_size = 0;
  std::string fingerprint;             // SentencePieceTokenizer::ModelFingerprint().
  std::vector<std::string> languages;  // Tagged languages, in id order ("en" first).
  std::string direction;               // ShardBuildOptions::direction.
  int64_t max_len = 0;                 // ShardBuildOptions::max_len.
  std::vector<ShardSummary> shards;    // In (split, locale, direction) order.
  double train_seconds = 0;            // Wall time of SentencePiece training (sampling included).
  double tokenize_seconds = 0;         // Wall time of TokenizeCorpus over every shard.
  int64_t tokenized_sentences = 0;     // Sentences encoded: 2 per example, dropped ones included.
  double sentences_per_second = 0;     // tokenized_sentences / tokenize_seconds.
};

/// Reads the TSVs, trains `<output_dir>/spm.model` on the train split (temperature-sampled over
/// languages), tokenizes every split in the chosen directions and writes one shard per (split,
/// source, target), then shards.json last (its presence marks a complete set). Blocks; uses
/// options.num_threads threads. Errors name the file or option at fault.
[[nodiscard]] absl::StatusOr<ShardSetSummary> BuildShards(const ShardBuildOptions& options);

/// shards.json's text for `summary` (deterministic; no timings).
std::string ShardSetJson(const ShardSetSummary& summary);

}  // namespace deepnet::data
