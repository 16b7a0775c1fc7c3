#pragma once

// The few pieces of Python 3 text semantics that sacreBLEU-compatible scoring depends on:
// UTF-8 decoding, str.isspace(), str.rstrip(), str.split() and reading a file line by line.
// Everything works on UTF-8 bytes; nothing depends on the C locale.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepnet::data {

/// True for exactly the code points Python's str.isspace() (and so str.split() and
/// str.rstrip()) treats as whitespace: \t \n \v \f \r, U+001C..U+001F, space, U+0085, U+00A0,
/// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. Not U+200B or U+FEFF.
bool IsPythonWhitespace(char32_t c);

/// Decodes the code point starting at s[pos] (pos < s.size()) into *c and returns its length in
/// bytes. Strict UTF-8 as Python decodes it; a byte that does not start a valid sequence (stray
/// continuation, overlong form, surrogate, > U+10FFFF, truncated) decodes alone as
/// U+DC80 + byte, as Python's "surrogateescape" would, so that any input has a defined meaning.
size_t DecodeUtf8(std::string_view s, size_t pos, char32_t* c);

/// Byte offset of the first invalid UTF-8 sequence in `s`, or nullopt when `s` is valid.
std::optional<size_t> FindInvalidUtf8(std::string_view s);

/// `s` without trailing Python whitespace (str.rstrip()); a view into `s`.
std::string_view RStripPythonWhitespace(std::string_view s);

/// Appends to *out the maximal runs of non-whitespace in `s` (str.split() without arguments);
/// the views point into `s`.
void SplitPythonWhitespace(std::string_view s, std::vector<std::string_view>* out);

/// Splits file contents into lines the way sacreBLEU reads a file: on '\n' only ('\r' stays a
/// character, removed later as trailing whitespace), with a final '\n' ending the last line
/// rather than starting an empty one. "" has no lines; "a\n\n" has "a" and "".
std::vector<std::string> SplitScoringLines(std::string_view text);

}  // namespace deepnet::data
