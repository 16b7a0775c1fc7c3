#include "data/sentencepiece_training.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/multilingual_stream.h"
#include "data/sentencepiece_bridge.h"
#include "data/splitmix64.h"
#include "storage/atomic_file.h"

namespace deepnet::data {
namespace {

constexpr int32_t kNumSpecials = 4;  // pad, bos, eos, unk.

absl::Status BadOption(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("SentencePieceTrainOptions.", field, ": ", problem));
}

uint64_t HashLanguage(std::string_view lang) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64.
  for (unsigned char c : lang) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

// Splits `total` into integer quotas proportional to `shares` (largest remainder; ties go to
// the lower index), so the quotas sum to exactly `total`.
std::vector<int64_t> Apportion(const std::vector<double>& shares, int64_t total) {
  std::vector<int64_t> quotas(shares.size());
  std::vector<double> remainders(shares.size());
  int64_t assigned = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    const double exact = shares[i] * static_cast<double>(total);
    quotas[i] = static_cast<int64_t>(std::floor(exact));
    remainders[i] = exact - static_cast<double>(quotas[i]);
    assigned += quotas[i];
  }
  std::vector<size_t> order(shares.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainders[a] > remainders[b]; });
  for (size_t k = 0; assigned < total; k = (k + 1) % order.size(), ++assigned) {
    ++quotas[order[k]];
  }
  return quotas;
}

}  // namespace

absl::Status Validate(const SentencePieceTrainOptions& options) {
  if (options.sentences.empty()) return BadOption("sentences", "no language given");
  for (const auto& [lang, list] : options.sentences) {
    if (list.empty()) return BadOption("sentences", absl::StrCat("language '", lang, "' is empty"));
  }
  if (!(options.temperature > 0.0) || !std::isfinite(options.temperature)) {
    return BadOption("temperature", absl::StrCat("must be > 0 (got ", options.temperature, ")"));
  }
  if (options.training_sentences <= 0) {
    return BadOption("training_sentences",
                     absl::StrCat("must be > 0 (got ", options.training_sentences, ")"));
  }
  const int64_t min_vocab = kNumSpecials + static_cast<int64_t>(options.languages.size()) + 1;
  if (options.vocab_size < min_vocab) {
    return BadOption("vocab_size", absl::StrCat("must be >= ", min_vocab,
                                                " (4 specials + one tag per language + 1; got ",
                                                options.vocab_size, ")"));
  }
  const std::vector<std::string> kTypes = {"unigram", "bpe", "char", "word"};
  if (std::find(kTypes.begin(), kTypes.end(), options.model_type) == kTypes.end()) {
    return BadOption("model_type", absl::StrCat("must be one of unigram, bpe, char, word (got '",
                                                options.model_type, "')"));
  }
  if (!(options.character_coverage > 0.0 && options.character_coverage <= 1.0)) {
    return BadOption("character_coverage",
                     absl::StrCat("must be in (0, 1] (got ", options.character_coverage, ")"));
  }
  for (size_t i = 0; i < options.languages.size(); ++i) {
    const std::string& lang = options.languages[i];
    if (lang.empty() || lang.find_first_of(",<> \t\r\n") != std::string::npos) {
      return BadOption("languages", absl::StrCat("'", lang, "' is not a usable language code"));
    }
    if (std::find(options.languages.begin(), options.languages.begin() + i, lang) !=
        options.languages.begin() + i) {
      return BadOption("languages", absl::StrCat("'", lang, "' is listed twice"));
    }
  }
  if (options.model_prefix.empty()) return BadOption("model_prefix", "must be set");
  if (options.num_threads < 1) {
    return BadOption("num_threads", absl::StrCat("must be >= 1 (got ", options.num_threads, ")"));
  }
  return absl::OkStatus();
}

std::vector<std::string_view> SampleTrainingMix(const SentencePieceTrainOptions& options) {
  std::vector<int64_t> counts;
  for (const auto& entry : options.sentences) {
    counts.push_back(static_cast<int64_t>(entry.second.size()));
  }
  const std::vector<int64_t> quotas =
      Apportion(TemperatureProbabilities(counts, options.temperature), options.training_sentences);
  std::vector<std::string_view> mix;
  mix.reserve(static_cast<size_t>(options.training_sentences));
  size_t index = 0;
  for (const auto& [lang, list] : options.sentences) {
    const int64_t quota = quotas[index++];
    const int64_t n = static_cast<int64_t>(list.size());
    if (n == 0) continue;  // Only in options that Validate() rejects.
    for (int64_t pass = 0; pass < quota / n; ++pass) {
      mix.insert(mix.end(), list.begin(), list.end());
    }
    // The remainder without replacement: the first `rest` steps of a Fisher-Yates shuffle.
    const int64_t rest = quota % n;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    SplitMix64 rng(SplitMix64::MixSeeds(options.seed, HashLanguage(lang)));
    for (int64_t i = 0; i < rest; ++i) {
      const int64_t j = i + static_cast<int64_t>(rng.UniformBelow(static_cast<uint64_t>(n - i)));
      std::swap(order[i], order[j]);
      mix.push_back(list[order[i]]);
    }
  }
  return mix;
}

absl::Status TrainSentencePiece(const SentencePieceTrainOptions& options) {
  if (absl::Status status = Validate(options); !status.ok()) return status;
  std::vector<std::string> tags;
  for (const std::string& lang : options.languages) tags.push_back(absl::StrCat("<2", lang, ">"));
  // No model_prefix: SentencePiece then returns the model instead of writing it, and the model
  // does not record the output path, so the same options give the same bytes (and the same
  // fingerprint) in any folder. num_threads is recorded and does change the model slightly.
  std::vector<std::pair<std::string, std::string>> flags = {
      {"vocab_size", absl::StrCat(options.vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", absl::StrCat(options.character_coverage)},
      {"num_threads", absl::StrCat(options.num_threads)},
      {"pad_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"unk_id", "3"},
      // We sampled the mix ourselves: SentencePiece must use all of it, in order.
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      // Only warnings and errors on stderr; the INFO progress log is hundreds of lines.
      {"minloglevel", "1"},
  };
  if (!tags.empty()) flags.emplace_back("user_defined_symbols", absl::StrJoin(tags, ","));
  std::string model;
  const internal::SpmResult result = internal::TrainSpm(flags, SampleTrainingMix(options), &model);
  if (!result.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(result.code),
                        absl::StrCat("SentencePiece training (model_prefix=", options.model_prefix,
                                     ", vocab_size=", options.vocab_size,
                                     ", model_type=", options.model_type, ", character_coverage=",
                                     options.character_coverage, ") failed: ", result.message));
  }
  // The .vocab file is for people: one `piece<TAB>score` line per id, as spm_train writes it.
  internal::SpmResult module_error;
  std::unique_ptr<internal::SpmProcessor> owned = internal::NewSpmProcessor(&module_error);
  if (owned == nullptr) return absl::UnavailableError(module_error.message);
  internal::SpmProcessor& processor = *owned;
  if (const internal::SpmResult r = processor.LoadFromSerialized(model); !r.ok()) {
    return absl::InternalError(
        absl::StrCat("SentencePiece returned a model it cannot load: ", r.message));
  }
  std::string vocab;
  for (int id = 0; id < processor.PieceSize(); ++id) {
    absl::StrAppend(&vocab, processor.IdToPiece(id), "\t", processor.GetScore(id), "\n");
  }
  if (absl::Status status = storage::WriteFileAtomically(options.model_prefix + ".vocab", vocab);
      !status.ok()) {
    return status;
  }
  // The model last: a .model file next to a stale .vocab is the worse half-state.
  return storage::WriteFileAtomically(options.model_prefix + ".model", model);
}

}  // namespace deepnet::data
