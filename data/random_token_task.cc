#include "data/random_token_task.h"

#include <algorithm>
#include <sstream>

#include "data/splitmix64.h"

namespace deepnet::data {
namespace {

constexpr int32_t kFirstTag = 4;  // After pad, bos, eos, unk.

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) words.push_back(std::move(w));
  return words;
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

}  // namespace

std::string ApplyRandomTokenTarget(const std::string& target, const std::string& source) {
  std::vector<std::string> words = Words(source);
  if (target == "reverse") std::reverse(words.begin(), words.end());
  return Join(words);
}

std::vector<ParallelExample> GenerateRandomTokenCorpus(const RandomTokenTaskOptions& options) {
  SplitMix64 rng(options.seed ^ 0x72616e646f6d746bULL);  // "randomtk": apart from other tasks.
  const int64_t span = std::max<int64_t>(options.max_len - options.min_len + 1, 1);
  const uint64_t vocab = static_cast<uint64_t>(std::max<int64_t>(options.vocab_size, 1));
  std::vector<ParallelExample> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(options.pairs, 0)));
  for (int64_t i = 0; i < options.pairs; ++i) {
    const int64_t len = options.min_len + static_cast<int64_t>(rng.UniformBelow(span));
    std::vector<std::string> words;
    words.reserve(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j)
      words.push_back("s" + std::to_string(rng.UniformBelow(vocab)));
    ParallelExample ex;
    ex.src_lang = std::string(kRandomTokenSourceLang);
    ex.tgt_lang = options.target;
    ex.src = Join(words);
    ex.tgt = ApplyRandomTokenTarget(options.target, ex.src);
    out.push_back(std::move(ex));
  }
  return out;
}

RandomTokenTokenizer::RandomTokenTokenizer(int64_t symbols, std::vector<std::string> languages)
    : symbols_(symbols), languages_(std::move(languages)) {}

int32_t RandomTokenTokenizer::SymbolId(int64_t k) const {
  return kFirstTag + static_cast<int32_t>(languages_.size()) + static_cast<int32_t>(k);
}

int32_t RandomTokenTokenizer::vocab_size() const { return SymbolId(symbols_); }

std::vector<int32_t> RandomTokenTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const std::string& w : Words(text)) {
    int64_t k = -1;
    if (w.size() >= 2 && w.size() <= 12 && w[0] == 's' &&
        std::all_of(w.begin() + 1, w.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        (w.size() == 2 || w[1] != '0')) {
      k = std::stoll(w.substr(1));
    }
    ids.push_back(k >= 0 && k < symbols_ ? SymbolId(k) : unk_id());
  }
  return ids;
}

std::string RandomTokenTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> words;
  for (int32_t id : ids) {
    const int64_t k = static_cast<int64_t>(id) - SymbolId(0);
    if (k >= 0 && k < symbols_) words.push_back("s" + std::to_string(k));
  }
  return Join(words);
}

std::optional<int32_t> RandomTokenTokenizer::LangTagId(std::string_view lang) const {
  for (size_t i = 0; i < languages_.size(); ++i) {
    if (languages_[i] == lang) return kFirstTag + static_cast<int32_t>(i);
  }
  return std::nullopt;
}

}  // namespace deepnet::data
