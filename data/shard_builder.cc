#include "data/shard_builder.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/parallel_corpus.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/sentencepiece_training.h"
#include "data/token_shard.h"
#include "storage/atomic_file.h"

namespace deepnet::data {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

absl::Status BadOption(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("ShardBuildOptions.", field, ": ", problem));
}

absl::Status ValidateOptions(const ShardBuildOptions& o) {
  if (o.input_dir.empty()) return BadOption("input_dir", "must be set");
  if (o.output_dir.empty()) return BadOption("output_dir", "must be set");
  if (o.direction != "en2x" && o.direction != "x2en" && o.direction != "both") {
    return BadOption("direction",
                     absl::StrCat("must be en2x, x2en or both (got '", o.direction, "')"));
  }
  if (o.splits.empty()) return BadOption("splits", "must name at least one split");
  if (o.train_split.empty()) return BadOption("train_split", "must be set");
  if (o.max_len < 0)
    return BadOption("max_len", absl::StrCat("must be >= 0 (got ", o.max_len, ")"));
  if (o.num_threads < 1) {
    return BadOption("num_threads", absl::StrCat("must be >= 1 (got ", o.num_threads, ")"));
  }
  for (const std::string& locale : o.locales) {
    if (locale.empty() || locale == "en") {
      return BadOption("locales", absl::StrCat("'", locale, "' is not a non-English locale"));
    }
  }
  return absl::OkStatus();
}

std::string TsvPath(const ShardBuildOptions& o, const std::string& split,
                    const std::string& locale) {
  return (fs::path(o.input_dir) / absl::StrCat(split, ".", locale, ".tsv")).string();
}

// Locales with a `<train_split>.<locale>.tsv` in input_dir, sorted.
absl::StatusOr<std::vector<std::string>> DiscoverLocales(const ShardBuildOptions& o) {
  std::error_code error;
  std::vector<std::string> locales;
  const std::string prefix = absl::StrCat(o.train_split, ".");
  const std::string suffix = ".tsv";
  for (fs::directory_iterator it(o.input_dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string locale = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (locale != "en") locales.push_back(std::move(locale));
    }
  }
  if (error) {
    return absl::NotFoundError(absl::StrCat(o.input_dir, ": cannot list: ", error.message()));
  }
  if (locales.empty()) {
    return absl::NotFoundError(
        absl::StrCat(o.input_dir, ": no ", o.train_split, ".<locale>.tsv files"));
  }
  std::sort(locales.begin(), locales.end());
  return locales;
}

// Reads one `<split>.<locale>.tsv`, whose every line must be English -> locale.
absl::StatusOr<std::vector<ParallelExample>> ReadLocaleFile(const std::string& path,
                                                            const std::string& locale) {
  absl::StatusOr<std::vector<ParallelExample>> examples = ReadTsvCorpus(path, "en", locale);
  if (!examples.ok()) return examples.status();
  for (size_t i = 0; i < examples->size(); ++i) {
    const ParallelExample& e = (*examples)[i];
    if (e.src_lang != "en" || e.tgt_lang != locale) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": pair ", i + 1, " is ", e.src_lang,
                                                     "->", e.tgt_lang, ", expected en->", locale,
                                                     " (the file name's locale)"));
    }
  }
  return examples;
}

// Distinct sentences per language of the train split; English counted once for all locales.
std::map<std::string, std::vector<std::string>> TrainingText(
    const std::map<std::string, std::vector<ParallelExample>>& train) {
  std::map<std::string, std::vector<std::string>> text;
  std::unordered_set<std::string_view> seen_en;
  for (const auto& [locale, examples] : train) {
    std::unordered_set<std::string_view> seen;
    for (const ParallelExample& e : examples) {
      if (seen_en.insert(e.src).second) text["en"].push_back(e.src);
      if (seen.insert(e.tgt).second) text[locale].push_back(e.tgt);
    }
  }
  return text;
}

// TokenizeCorpus over `chunks` on one thread each; output in chunk order, so it is the same
// for any number of chunks. Returns the examples kept and adds the dropped ones to *dropped.
std::vector<TokenizedExample> TokenizeChunks(
    const std::vector<std::vector<ParallelExample>>& chunks, const Tokenizer& tokenizer,
    int64_t max_len, int64_t* dropped) {
  std::vector<std::vector<TokenizedExample>> parts(chunks.size());
  std::vector<int64_t> part_dropped(chunks.size(), 0);
  std::vector<std::thread> threads;
  for (size_t c = 1; c < chunks.size(); ++c) {
    threads.emplace_back(
        [&, c] { parts[c] = TokenizeCorpus(chunks[c], tokenizer, max_len, &part_dropped[c]); });
  }
  parts[0] = TokenizeCorpus(chunks[0], tokenizer, max_len, &part_dropped[0]);  // chunks >= 1.
  for (std::thread& t : threads) t.join();
  std::vector<TokenizedExample> out = std::move(parts[0]);
  for (size_t c = 1; c < parts.size(); ++c) {
    out.insert(out.end(), std::make_move_iterator(parts[c].begin()),
               std::make_move_iterator(parts[c].end()));
  }
  for (int64_t d : part_dropped) *dropped += d;
  return out;
}

// `examples` (en -> locale) in one direction, split into `n` contiguous chunks.
std::vector<std::vector<ParallelExample>> DirectionChunks(
    const std::vector<ParallelExample>& examples, bool to_english, int n) {
  std::vector<std::vector<ParallelExample>> chunks(static_cast<size_t>(n));
  for (size_t i = 0; i < examples.size(); ++i) {
    const ParallelExample& e = examples[i];
    chunks[i * n / examples.size()].push_back(
        to_english ? ParallelExample{e.tgt_lang, e.src_lang, e.tgt, e.src} : e);
  }
  return chunks;
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out->append({'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]});
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

}  // namespace

std::string ShardSetJson(const ShardSetSummary& summary) {
  std::string json = "{\n  \"format\": \"DNSHARD1\",\n  \"tokenizer\": \"spm.model\",\n";
  absl::StrAppend(&json, "  \"vocab_size\": ", summary.vocab_size, ",\n  \"fingerprint\": ");
  AppendJsonString(&json, summary.fingerprint);
  json += ",\n  \"languages\": [";
  for (size_t i = 0; i < summary.languages.size(); ++i) {
    if (i > 0) json += ", ";
    AppendJsonString(&json, summary.languages[i]);
  }
  json += "],\n  \"direction\": ";
  AppendJsonString(&json, summary.direction);
  absl::StrAppend(&json, ",\n  \"max_len\": ", summary.max_len, ",\n  \"shards\": [");
  for (size_t i = 0; i < summary.shards.size(); ++i) {
    const ShardSummary& s = summary.shards[i];
    json += i > 0 ? ",\n    {\"file\": " : "\n    {\"file\": ";
    AppendJsonString(&json, s.file);
    json += ", \"split\": ";
    AppendJsonString(&json, s.split);
    json += ", \"src_lang\": ";
    AppendJsonString(&json, s.src_lang);
    json += ", \"tgt_lang\": ";
    AppendJsonString(&json, s.tgt_lang);
    absl::StrAppend(&json, ", \"pairs\": ", s.pairs, ", \"src_tokens\": ", s.src_tokens,
                    ", \"tgt_tokens\": ", s.tgt_tokens,
                    ", \"tokens\": ", s.src_tokens + s.tgt_tokens, ", \"dropped\": ", s.dropped,
                    "}");
  }
  json += summary.shards.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return json;
}

absl::StatusOr<ShardSetSummary> BuildShards(const ShardBuildOptions& options) {
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  std::vector<std::string> locales = options.locales;
  if (locales.empty()) {
    absl::StatusOr<std::vector<std::string>> found = DiscoverLocales(options);
    if (!found.ok()) return found.status();
    locales = *std::move(found);
  }
  std::sort(locales.begin(), locales.end());
  locales.erase(std::unique(locales.begin(), locales.end()), locales.end());
  // Fail on a missing file before the expensive training, not after it.
  std::vector<std::string> needed_splits = options.splits;
  needed_splits.push_back(options.train_split);
  for (const std::string& split : needed_splits) {
    for (const std::string& locale : locales) {
      const std::string path = TsvPath(options, split, locale);
      if (std::error_code error; !fs::is_regular_file(path, error)) {
        return absl::NotFoundError(
            absl::StrCat(path, ": no such file (split '", split, "', locale '", locale, "')"));
      }
    }
  }
  if (std::error_code error; !fs::create_directories(options.output_dir, error) && error) {
    return absl::ErrnoToStatus(error.value(), absl::StrCat(options.output_dir, ": cannot create"));
  }

  ShardSetSummary summary;
  summary.direction = options.direction;
  summary.max_len = options.max_len;
  const Clock::time_point train_start = Clock::now();
  SentencePieceTrainOptions spm;
  {
    std::map<std::string, std::vector<ParallelExample>> train;
    for (const std::string& locale : locales) {
      auto examples = ReadLocaleFile(TsvPath(options, options.train_split, locale), locale);
      if (!examples.ok()) return examples.status();
      train[locale] = *std::move(examples);
    }
    spm.sentences = TrainingText(train);
  }
  spm.temperature = options.temperature;
  spm.training_sentences = options.training_sentences;
  spm.seed = options.seed;
  spm.vocab_size = options.vocab_size;
  spm.model_type = options.model_type;
  spm.character_coverage = options.character_coverage;
  spm.languages = {"en"};
  spm.languages.insert(spm.languages.end(), locales.begin(), locales.end());
  spm.model_prefix = (fs::path(options.output_dir) / "spm").string();
  spm.num_threads = options.num_threads;
  if (absl::Status status = TrainSentencePiece(spm); !status.ok()) return status;
  spm.sentences.clear();
  summary.train_seconds = std::chrono::duration<double>(Clock::now() - train_start).count();

  auto tokenizer = SentencePieceTokenizer::Load(spm.model_prefix + ".model");
  if (!tokenizer.ok()) return tokenizer.status();
  summary.vocab_size = (*tokenizer)->vocab_size();
  summary.fingerprint = (*tokenizer)->ModelFingerprint();
  summary.languages = (*tokenizer)->Languages();

  std::vector<bool> to_english_dirs;
  if (options.direction != "x2en") to_english_dirs.push_back(false);
  if (options.direction != "en2x") to_english_dirs.push_back(true);
  Clock::duration tokenize_time{};
  for (const std::string& split : options.splits) {
    for (const std::string& locale : locales) {
      auto examples = ReadLocaleFile(TsvPath(options, split, locale), locale);
      if (!examples.ok()) return examples.status();
      for (const bool to_english : to_english_dirs) {
        ShardSummary shard;
        shard.split = split;
        shard.src_lang = to_english ? locale : "en";
        shard.tgt_lang = to_english ? "en" : locale;
        shard.file = absl::StrCat(split, ".", shard.src_lang, "-", shard.tgt_lang, ".bin");
        // At least ~1000 examples per thread: spawning costs more than tiny chunks save.
        const int threads = static_cast<int>(std::clamp<int64_t>(
            static_cast<int64_t>(examples->size()) / 1000, 1, options.num_threads));
        const auto chunks = DirectionChunks(*examples, to_english, threads);
        const Clock::time_point start = Clock::now();
        const std::vector<TokenizedExample> tokenized =
            TokenizeChunks(chunks, **tokenizer, options.max_len, &shard.dropped);
        tokenize_time += Clock::now() - start;
        summary.tokenized_sentences += 2 * static_cast<int64_t>(examples->size());
        shard.pairs = static_cast<int64_t>(tokenized.size());
        for (const TokenizedExample& t : tokenized) {
          shard.src_tokens += static_cast<int64_t>(t.src.size());
          shard.tgt_tokens += static_cast<int64_t>(t.tgt.size());
        }
        const TokenShardHeader header{summary.vocab_size, summary.fingerprint, shard.src_lang,
                                      shard.tgt_lang};
        if (absl::Status status = WriteTokenShard(
                (fs::path(options.output_dir) / shard.file).string(), header, tokenized);
            !status.ok()) {
          return status;
        }
        summary.shards.push_back(std::move(shard));
      }
    }
  }
  summary.tokenize_seconds = std::chrono::duration<double>(tokenize_time).count();
  if (summary.tokenize_seconds > 0) {
    summary.sentences_per_second =
        static_cast<double>(summary.tokenized_sentences) / summary.tokenize_seconds;
  }
  if (absl::Status status = storage::WriteFileAtomically(
          (fs::path(options.output_dir) / "shards.json").string(), ShardSetJson(summary));
      !status.ok()) {
    return status;
  }
  return summary;
}

}  // namespace deepnet::data
