#include "data/byte_tokenizer.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepnet::data {
namespace {

constexpr int32_t kNumSpecials = 4;  // pad, bos, eos, unk.
constexpr int32_t kNumBytes = 256;
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD in UTF-8.

bool InRange(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

// Bytes of the UTF-8 prefix starting at text[pos] that could still begin a well-formed
// sequence, and whether they form a complete one. Byte ranges follow Unicode 15, Table 3-7
// ("Well-Formed UTF-8 Byte Sequences"), which excludes overlongs, surrogates and > U+10FFFF.
struct Utf8Prefix {
  size_t length;
  bool complete;
};

Utf8Prefix ScanUtf8(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, true};
  size_t needed = 0;
  unsigned char second_lo = 0x80;
  unsigned char second_hi = 0xBF;
  if (InRange(lead, 0xC2, 0xDF)) {
    needed = 2;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    needed = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // No overlong 3-byte forms.
    if (lead == 0xED) second_hi = 0x9F;  // No UTF-16 surrogates.
  } else if (InRange(lead, 0xF0, 0xF4)) {
    needed = 4;
    if (lead == 0xF0) second_lo = 0x90;  // No overlong 4-byte forms.
    if (lead == 0xF4) second_hi = 0x8F;  // Nothing above U+10FFFF.
  } else {
    return {1, false};  // Continuation byte, C0/C1 or F5..FF: never a valid lead.
  }
  size_t length = 1;
  while (length < needed && pos + length < text.size()) {
    const auto c = static_cast<unsigned char>(text[pos + length]);
    const bool ok = length == 1 ? InRange(c, second_lo, second_hi) : InRange(c, 0x80, 0xBF);
    if (!ok) break;
    ++length;
  }
  return {length, length == needed};
}

}  // namespace

ByteTokenizer::ByteTokenizer(std::vector<std::string> languages)
    : languages_(std::move(languages)) {}

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text) const {
  const int32_t byte_base = kNumSpecials + static_cast<int32_t>(languages_.size());
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(byte_base + static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::Decode(const std::vector<int32_t>& ids) const {
  const int32_t byte_base = kNumSpecials + static_cast<int32_t>(languages_.size());
  std::string bytes;
  bytes.reserve(ids.size());
  for (int32_t id : ids) {
    // Specials and tags are skipped; so are ids outside the vocabulary, which only a caller
    // bug can produce and which carry no text.
    if (id < byte_base || id >= byte_base + kNumBytes) continue;
    bytes.push_back(static_cast<char>(static_cast<unsigned char>(id - byte_base)));
  }
  // A model can emit any byte sequence. Each maximal ill-formed subpart becomes one U+FFFD,
  // the practice recommended by Unicode (chapter 3, "U+FFFD Substitution of Maximal Subparts").
  std::string text;
  text.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Prefix prefix = ScanUtf8(bytes, pos);
    if (prefix.complete) {
      text.append(bytes, pos, prefix.length);
    } else {
      text.append(kReplacementChar);
    }
    pos += prefix.length;
  }
  return text;
}

int32_t ByteTokenizer::vocab_size() const {
  return kNumSpecials + static_cast<int32_t>(languages_.size()) + kNumBytes;
}

std::optional<int32_t> ByteTokenizer::LangTagId(std::string_view lang) const {
  for (size_t i = 0; i < languages_.size(); ++i) {
    if (languages_[i] == lang) return kNumSpecials + static_cast<int32_t>(i);
  }
  return std::nullopt;
}

}  // namespace deepnet::data
