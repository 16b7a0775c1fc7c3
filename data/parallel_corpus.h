#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace deepnet::data {

/// One sentence pair with its languages.
struct ParallelExample {
  std::string src_lang;
  std::string tgt_lang;
  std::string src;
  std::string tgt;
};

/// Token ids ready for batching. `src` is `<2tgt_lang> text... EOS`; `tgt` is `text... EOS`
/// (the decoder input is BOS followed by tgt without its last token).
struct TokenizedExample {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

/// Reads tab-separated parallel text. Each line is either `src<TAB>tgt` (languages taken from
/// the arguments) or `src_lang<TAB>tgt_lang<TAB>src<TAB>tgt`. Empty lines are skipped. A line
/// with another number of fields, or an empty side, is an error naming `path:line`.
absl::StatusOr<std::vector<ParallelExample>> ReadTsvCorpus(const std::string& path,
                                                           const std::string& src_lang,
                                                           const std::string& tgt_lang);

/// Tokenizes every example. Examples whose target language has no tag, or whose source or
/// target exceeds max_len tokens (tag and EOS included), are dropped and counted in *dropped
/// (may be null). max_len 0 means no limit.
std::vector<TokenizedExample> TokenizeCorpus(const std::vector<ParallelExample>& examples,
                                             const Tokenizer& tokenizer, int64_t max_len,
                                             int64_t* dropped);

}  // namespace deepnet::data
