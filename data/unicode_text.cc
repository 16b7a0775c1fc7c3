#include "data/unicode_text.h"

namespace deepnet::data {
namespace {

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at s[pos], or 0 when there is none. The second-byte ranges
// exclude overlong forms, UTF-16 surrogates and code points above U+10FFFF (RFC 3629 table 3-7).
size_t ValidSequenceLength(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (pos + len > s.size()) return 0;
  const auto b1 = static_cast<unsigned char>(s[pos + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (!IsContinuation(static_cast<unsigned char>(s[pos + i]))) return 0;
  }
  return len;
}

}  // namespace

bool IsPythonWhitespace(char32_t c) {
  if (c < 0x80) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

size_t DecodeUtf8(std::string_view s, size_t pos, char32_t* c) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const size_t len = ValidSequenceLength(s, pos);
  switch (len) {
    case 1:
      *c = b0;
      return 1;
    case 2:
      *c = (char32_t{b0} & 0x1F) << 6 | (static_cast<unsigned char>(s[pos + 1]) & 0x3F);
      return 2;
    case 3:
      *c = (char32_t{b0} & 0x0F) << 12 |
           (char32_t{static_cast<unsigned char>(s[pos + 1])} & 0x3F) << 6 |
           (static_cast<unsigned char>(s[pos + 2]) & 0x3F);
      return 3;
    case 4:
      *c = (char32_t{b0} & 0x07) << 18 |
           (char32_t{static_cast<unsigned char>(s[pos + 1])} & 0x3F) << 12 |
           (char32_t{static_cast<unsigned char>(s[pos + 2])} & 0x3F) << 6 |
           (static_cast<unsigned char>(s[pos + 3]) & 0x3F);
      return 4;
    default:
      *c = 0xDC00 + b0;  // surrogateescape: bytes 0x80..0xFF become U+DC80..U+DCFF.
      return 1;
  }
}

std::optional<size_t> FindInvalidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = ValidSequenceLength(s, pos);
    if (len == 0) return pos;
    pos += len;
  }
  return std::nullopt;
}

std::string_view RStripPythonWhitespace(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    // Step back to the start of the last code point: at most 3 continuation bytes.
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && IsContinuation(static_cast<unsigned char>(s[start]))) {
      --start;
    }
    char32_t c;
    if (DecodeUtf8(s, start, &c) != end - start) break;  // Not one whole code point.
    if (!IsPythonWhitespace(c)) break;
    end = start;
  }
  return s.substr(0, end);
}

void SplitPythonWhitespace(std::string_view s, std::vector<std::string_view>* out) {
  size_t token_start = 0;
  bool in_token = false;
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = static_cast<unsigned char>(s[pos]);
    const size_t len = c < 0x80 ? 1 : DecodeUtf8(s, pos, &c);  // ASCII fast path.
    if (IsPythonWhitespace(c)) {
      if (in_token) out->push_back(s.substr(token_start, pos - token_start));
      in_token = false;
    } else if (!in_token) {
      token_start = pos;
      in_token = true;
    }
    pos += len;
  }
  if (in_token) out->push_back(s.substr(token_start));
}

std::vector<std::string> SplitScoringLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

}  // namespace deepnet::data
