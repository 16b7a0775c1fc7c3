#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepnet::data {

/// sacreBLEU's default BLEU tokenizer "13a" (the tokenization of mteval-v13a.pl), byte for byte
/// as sacreBLEU 2.6.0 applies it (sacrebleu/tokenizers/tokenizer_13a.py + tokenizer_re.py):
///  1. remove "<skipped>"; "-\n" -> ""; "\n" -> " ";
///  2. only if the line contains '&': replace &quot; &amp; &lt; &gt; (in that order, each over
///     the whole line, so "&amp;lt;" becomes "<");
///  3. pad with one space on each side;
///  4. four global regex substitutions, each a left-to-right scan of non-overlapping matches:
///     each of {|}~[\]^_` !"#$%&()*+:;<=>?@/ gets a space on both sides;
///     ([^0-9])([.,]) -> "\1 \2 ";  ([.,])([^0-9]) -> " \1 \2";  ([0-9])(-) -> "\1 \2 ";
///  5. split on Python whitespace (see IsPythonWhitespace; U+00A0, U+3000, ... included).
/// [0-9] is ASCII only, as in sacreBLEU. Done by hand on UTF-8 bytes: every pattern is ASCII and
/// [^0-9] only ever inserts a space next to a whole character, so bytes give the same result as
/// code points. No std::regex, no locale.
///
/// The object only holds scratch buffers, so a corpus is tokenized without per-line allocation.
/// Not thread-safe: use one per thread.
class Tokenizer13a {
 public:
  /// The tokens of `line`. The views point into this object and stay valid until the next call.
  const std::vector<std::string_view>& Tokenize(std::string_view line);

  /// The tokens joined by single spaces: exactly the string sacreBLEU's Tokenizer13a returns.
  static std::string TokenizeToString(std::string_view line);

 private:
  std::string text_;     // The line after each step.
  std::string scratch_;  // The output of the step running now.
  std::vector<std::string_view> tokens_;
};

}  // namespace deepnet::data
