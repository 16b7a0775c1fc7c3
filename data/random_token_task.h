#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/parallel_corpus.h"
#include "data/tokenizer.h"

namespace deepnet::data {

/// A uniform random-token task (arXiv:2203.00555-style controlled runs): each source is
/// `length` symbols drawn independently and uniformly from `vocab_size` symbols, length uniform
/// in [min_len, max_len]; the target is a deterministic function of the source ("copy": the
/// same symbols, "reverse": in reverse order), so the task is learnable and its cross-entropy
/// floor is 0. Symbols are written `s<k>` (k in [0, vocab_size)), space-separated, so the
/// corpus flows through the same text pipeline as every other source.
struct RandomTokenTaskOptions {
  int64_t vocab_size = 64;
  int64_t pairs = 10000;
  int64_t min_len = 4;
  int64_t max_len = 16;
  std::string target = "copy";  // "copy" or "reverse".
  uint64_t seed = 1;
};

/// Source language of every pair; the target language is the option's `target` name.
inline constexpr std::string_view kRandomTokenSourceLang = "rnd";

/// The corpus: exactly `pairs` examples, deterministic in the options (same on every machine).
/// Expects validated options (job::ValidateRandomTokens).
std::vector<ParallelExample> GenerateRandomTokenCorpus(const RandomTokenTaskOptions& options);

/// The target text of a source text under `target` ("copy" or "reverse").
std::string ApplyRandomTokenTarget(const std::string& target, const std::string& source);

/// The vocabulary of the task: ids 0 pad, 1 bos, 2 eos, 3 unk, one `<2LANG>` tag per language
/// (in the order given), then the `symbols` symbols `s0`..`s<symbols-1>`. Encode splits on
/// whitespace; a word that is not a symbol becomes unk.
class RandomTokenTokenizer final : public Tokenizer {
 public:
  RandomTokenTokenizer(int64_t symbols, std::vector<std::string> languages);

  // Id of symbol k.
  int32_t SymbolId(int64_t k) const;

  // Tokenizer:
  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override;
  int32_t pad_id() const override { return 0; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t unk_id() const override { return 3; }
  std::optional<int32_t> LangTagId(std::string_view lang) const override;
  std::vector<std::string> Languages() const override { return languages_; }

 private:
  int64_t symbols_;
  std::vector<std::string> languages_;
};

}  // namespace deepnet::data
