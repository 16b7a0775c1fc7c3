#include "data/l10n_cleanup.h"

#include <string>

namespace deepnet::data {
namespace {

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsAsciiLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAsciiAlpha(char c) { return IsAsciiUpper(c) || IsAsciiLower(c); }
bool IsAsciiAlnum(char c) { return IsAsciiAlpha(c) || IsAsciiDigit(c); }
bool IsNonAscii(char c) { return static_cast<unsigned char>(c) >= 0x80; }
bool IsSpaceOrControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}
char ToLower(char c) { return IsAsciiUpper(c) ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ToLower(c);
  return out;
}

bool AllAsciiAlpha(std::string_view s) {
  for (char c : s) {
    if (!IsAsciiAlpha(c)) return false;
  }
  return true;
}

// Decodes the code point at s[i]; invalid bytes decode alone as U+FFFD. Returns its length.
size_t DecodeAt(std::string_view s, size_t i, char32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) {
    *cp = 0xfffd;
    return 1;
  }
  char32_t value = len == 1 ? c : c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) {
      *cp = 0xfffd;
      return 1;
    }
    value = (value << 6) | (cc & 0x3f);
  }
  *cp = value;
  return len;
}

// Non-ASCII code points that are spaces, punctuation, symbols, digits or specials rather than
// letters: Latin-1 punctuation and signs, general punctuation through miscellaneous symbols and
// arrows, CJK punctuation, full-width punctuation and digits, private use, emoji.
bool IsNonLetterCodePoint(char32_t c) {
  return (c >= 0x80 && c <= 0xbf) || c == 0xd7 || c == 0xf7 || (c >= 0x2000 && c <= 0x2bff) ||
         (c >= 0x3000 && c <= 0x303f) || (c >= 0xe000 && c <= 0xf8ff) ||
         (c >= 0xfe00 && c <= 0xfe6f) || c == 0xfeff || (c >= 0xff01 && c <= 0xff20) ||
         (c >= 0xff3b && c <= 0xff40) || (c >= 0xff5b && c <= 0xff65) || c >= 0xfff0 ||
         (c >= 0x1f000 && c <= 0x1faff);
}

// Length of the printf-style conversion starting at s[i] == '%' (also "%%", Python's
// "%(name)s" and Qt/KDE's "%1"), or 0 when none starts there.
size_t PlaceholderAt(std::string_view s, size_t i) {
  const size_t n = s.size();
  size_t j = i + 1;
  if (j < n && s[j] == '%') return 2;
  if (j < n && s[j] == '(') {
    const size_t close = s.find(')', j);
    if (close == std::string_view::npos || close - j > 40) return 0;
    j = close + 1;
  }
  size_t k = j;
  while (k < n && IsAsciiDigit(s[k])) ++k;
  const size_t leading_digits = k - j;
  if (leading_digits > 0 && k < n && s[k] == '$') j = k + 1;  // %1$s
  while (j < n && std::string_view("-+ #0'I").find(s[j]) != std::string_view::npos) ++j;
  if (j < n && s[j] == '*') {
    ++j;
  } else {
    while (j < n && IsAsciiDigit(s[j])) ++j;
  }
  if (j < n && s[j] == '.') {
    ++j;
    if (j < n && s[j] == '*') ++j;
    while (j < n && IsAsciiDigit(s[j])) ++j;
  }
  while (j < n && std::string_view("hlLqjzZt").find(s[j]) != std::string_view::npos) ++j;
  if (j < n && std::string_view("diouxXeEfFgGaAcCsSpnm").find(s[j]) != std::string_view::npos) {
    return j + 1 - i;
  }
  return leading_digits > 0 ? 1 + leading_digits : 0;  // Qt/KDE %1.
}

// Length of a brace field "{...}" (no spaces or braces inside, at most 64 bytes), or 0.
size_t BraceFieldAt(std::string_view s, size_t i) {
  for (size_t j = i + 1; j < s.size() && j - i <= 65; ++j) {
    if (s[j] == '}') return j + 1 - i;
    if (s[j] == '{' || IsSpaceOrControl(s[j])) return 0;
  }
  return 0;
}

// Length of a markup tag "<b>", "</a>", "<br/>", "<a href=...>" at s[i] == '<', or 0.
size_t TagAt(std::string_view s, size_t i) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '/') ++j;
  if (j >= s.size() || !IsAsciiAlpha(s[j])) return 0;
  for (; j < s.size() && j - i <= 200; ++j) {
    if (s[j] == '>') return j + 1 - i;
    if (s[j] == '<') return 0;
  }
  return 0;
}

// Length of an entity "&amp;", "&#39;", "&#x27;" at s[i] == '&', or 0.
size_t EntityAt(std::string_view s, size_t i) {
  size_t j = i + 1;
  const bool numeric = j < s.size() && s[j] == '#';
  if (numeric) ++j;
  const size_t start = j;
  while (j < s.size() && j - start < 10 && (IsAsciiAlnum(s[j]))) ++j;
  if (j == start || j >= s.size() || s[j] != ';') return 0;
  return j + 1 - i;
}

// Removes "(_F)" / "(&F)" with ASCII or full-width parentheses, and the spaces before it.
std::string StripCjkAccelerators(std::string_view s) {
  constexpr std::string_view kOpenWide = "\xef\xbc\x88";   // U+FF08
  constexpr std::string_view kCloseWide = "\xef\xbc\x89";  // U+FF09
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t open = s.substr(i, 1) == "(" ? 1 : s.substr(i, 3) == kOpenWide ? 3 : 0;
    if (open > 0 && i + open + 2 < s.size() && (s[i + open] == '_' || s[i + open] == '&') &&
        IsAsciiAlnum(s[i + open + 1])) {
      const size_t after = i + open + 2;
      const size_t close = s.substr(after, 1) == ")" ? 1 : s.substr(after, 3) == kCloseWide ? 3 : 0;
      if (close > 0) {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        i = after + close;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// Length of the code point at s[i] when it belongs to a word (ASCII letter, digit or '_', or
// a non-ASCII letter), else 0.
size_t WordCodePointAt(std::string_view s, size_t i) {
  if (s[i] == '_' || IsAsciiAlnum(s[i])) return 1;
  if (!IsNonAscii(s[i])) return 0;
  char32_t cp = 0;
  const size_t len = DecodeAt(s, i, &cp);
  return IsNonLetterCodePoint(cp) ? 0 : len;
}

// True when ASCII `s` has no letters of both cases.
bool SingleCase(std::string_view s) {
  bool upper = false, lower = false;
  for (char c : s) {
    upper |= IsAsciiUpper(c);
    lower |= IsAsciiLower(c);
  }
  return !(upper && lower);
}

// The offset of the accelerator '_' in `word` (a maximal run of word code points), or npos when
// it has none: see the header for what counts as an identifier.
size_t AcceleratorInWord(std::string_view word) {
  const size_t at = word.find('_');
  if (at == std::string_view::npos || word.find('_', at + 1) != std::string_view::npos) {
    return std::string_view::npos;  // No '_', or two or more: an identifier.
  }
  if (at + 1 == word.size()) return std::string_view::npos;  // Nothing to underline.
  bool ascii = true;
  for (char c : word) ascii &= !IsNonAscii(c);
  const std::string_view prefix = word.substr(0, at);
  const std::string_view suffix = word.substr(at + 1);
  if (ascii && prefix.size() >= 2 && SingleCase(prefix) && SingleCase(suffix)) {
    return std::string_view::npos;  // UID_MIN, file_name, language_COUNTRY.
  }
  return at;
}

}  // namespace

std::optional<std::string> NormalizeLocale(std::string_view folder) {
  std::string_view base = folder;
  std::string_view modifier;
  if (const size_t at = base.find('@'); at != std::string_view::npos) {
    modifier = base.substr(at + 1);
    base = base.substr(0, at);
  }
  if (const size_t dot = base.find('.'); dot != std::string_view::npos) base = base.substr(0, dot);
  std::string_view lang = base;
  std::string_view territory;
  if (const size_t us = base.find('_'); us != std::string_view::npos) {
    lang = base.substr(0, us);
    territory = base.substr(us + 1);
    const bool digits = territory.size() == 3 && IsAsciiDigit(territory[0]) &&
                        IsAsciiDigit(territory[1]) && IsAsciiDigit(territory[2]);
    if (!digits &&
        !((territory.size() == 2 || territory.size() == 4) && AllAsciiAlpha(territory))) {
      return std::nullopt;
    }
  }
  if (lang.size() < 2 || lang.size() > 3 || !AllAsciiAlpha(lang)) return std::nullopt;
  std::string language = Lower(lang);
  if (language == "en") return std::nullopt;  // English -> English is not a translation.
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"no", "nb"}, {"mo", "ro"}, {"iw", "he"}, {"in", "id"}, {"ji", "yi"}};
  for (const auto& [from, to] : kAliases) {
    if (language == from) language = std::string(to);
  }
  std::string region = Lower(territory);
  static constexpr std::pair<std::string_view, std::string_view> kRegions[] = {
      {"pt_br", "BR"},   {"zh_cn", "CN"}, {"zh_sg", "CN"}, {"zh_hans", "CN"}, {"zh_tw", "TW"},
      {"zh_hant", "TW"}, {"zh_hk", "HK"}, {"zh_mo", "HK"}, {"pa_pk", "PK"},   {"az_ir", "IR"}};
  std::string result = language;
  for (const auto& [key, kept] : kRegions) {
    if (language + "_" + region == key) result += "_" + std::string(kept);
  }
  static constexpr std::pair<std::string_view, std::string_view> kModifiers[] = {
      {"latin", "latin"},         {"latn", "latin"},
      {"cyrillic", "cyrillic"},   {"cyrl", "cyrillic"},
      {"valencia", "valencia"},   {"ije", "ijekavian"},
      {"ijekavian", "ijekavian"}, {"ijekavianlatin", "ijekavianlatin"},
      {"iqtelif", "iqtelif"}};
  const std::string mod = Lower(modifier);
  for (const auto& [key, kept] : kModifiers) {
    if (mod == key) result += "@" + std::string(kept);
  }
  return result;
}

bool IsFormatOnly(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    size_t skip = 0;
    if (c == '%') skip = PlaceholderAt(s, i);
    if (c == '{') skip = BraceFieldAt(s, i);
    if (c == '<') skip = TagAt(s, i);
    if (c == '&') skip = EntityAt(s, i);
    if (skip > 0) {
      i += skip;
      continue;
    }
    if (IsAsciiAlpha(c)) return false;
    if (!IsNonAscii(c)) {
      ++i;  // Digit, space, punctuation or control character.
      continue;
    }
    char32_t cp = 0;
    i += DecodeAt(s, i, &cp);
    if (!IsNonLetterCodePoint(cp)) return false;
  }
  return true;
}

bool HasPlaceholder(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if ((c == '%' && PlaceholderAt(s, i) > 0) || (c == '{' && BraceFieldAt(s, i) > 0) ||
        (c == '<' && TagAt(s, i) > 0) || (c == '&' && EntityAt(s, i) > 0)) {
      return true;
    }
  }
  return false;
}

std::string StripAccelerators(std::string_view text) {
  const std::string cjk = StripCjkAccelerators(text);
  std::string_view s = cjk;
  std::string amp;
  bool removed = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '&') {
      if (const size_t entity = EntityAt(s, i); entity > 0) {
        amp.append(s.substr(i, entity));
        i += entity - 1;
        continue;
      }
      if (i + 1 < s.size() && s[i + 1] == '&') {  // "&&" (a literal '&', or shell syntax).
        amp += "&&";
        ++i;
        continue;
      }
      const bool between_capitals =
          i > 0 && IsAsciiUpper(s[i - 1]) && i + 1 < s.size() && IsAsciiUpper(s[i + 1]);
      if (!removed && i + 1 < s.size() && s[i + 1] != '_' && WordCodePointAt(s, i + 1) > 0 &&
          !between_capitals) {
        removed = true;
        continue;
      }
    }
    amp += s[i];
  }
  s = amp;
  // One pass over the words keeps this linear even for hostile input.
  for (size_t i = 0; i < s.size();) {
    size_t len = WordCodePointAt(s, i);
    if (len == 0) {
      ++i;
      continue;
    }
    const size_t start = i;
    for (; len > 0; len = i < s.size() ? WordCodePointAt(s, i) : 0) i += len;
    const size_t at = AcceleratorInWord(s.substr(start, i - start));
    if (at != std::string_view::npos) {
      std::string out(s.substr(0, start + at));
      out.append(s.substr(start + at + 1));
      return out;
    }
  }
  return amp;
}

std::string CollapseWhitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool pending_space = false;
  for (char c : s) {
    if (IsSpaceOrControl(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

namespace {

std::vector<std::string_view> SplitLines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find('\n', start);
    if (end == std::string_view::npos) {
      lines.push_back(s.substr(start));
      return lines;
    }
    lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsSpaceOrControl(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpaceOrControl(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool IsWrappedProse(std::string_view source) {
  std::string_view previous;
  for (std::string_view line : SplitLines(source)) {
    line = TrimSpace(line);
    if (line.empty()) continue;
    if (!previous.empty() &&
        std::string_view(".!?:;").find(previous.back()) == std::string_view::npos &&
        IsAsciiLower(line.front())) {
      return true;
    }
    previous = line;
  }
  return false;
}

std::vector<TextPair> SplitLinePairs(std::string_view src, std::string_view tgt) {
  std::vector<TextPair> pairs;
  const std::vector<std::string_view> src_lines = SplitLines(src);
  const std::vector<std::string_view> tgt_lines = SplitLines(tgt);
  bool aligned =
      src_lines.size() > 1 && src_lines.size() == tgt_lines.size() && !IsWrappedProse(src);
  for (size_t i = 0; aligned && i < src_lines.size(); ++i) {
    aligned = TrimSpace(src_lines[i]).empty() == TrimSpace(tgt_lines[i]).empty();
  }
  if (!aligned) {
    pairs.emplace_back(std::string(src), std::string(tgt));
    return pairs;
  }
  for (size_t i = 0; i < src_lines.size(); ++i) {
    if (TrimSpace(src_lines[i]).empty()) continue;
    pairs.emplace_back(std::string(src_lines[i]), std::string(tgt_lines[i]));
  }
  return pairs;
}

void CleanupStats::Add(const CleanupStats& other) {
  messages += other.messages;
  split_messages += other.split_messages;
  dropped_empty += other.dropped_empty;
  dropped_format_only += other.dropped_format_only;
  dropped_identical += other.dropped_identical;
  kept += other.kept;
}

void CleanMessagePair(std::string_view src, std::string_view tgt, std::vector<TextPair>* out,
                      CleanupStats* stats) {
  ++stats->messages;
  std::vector<TextPair> lines = SplitLinePairs(src, tgt);
  if (lines.size() > 1) ++stats->split_messages;
  for (TextPair& line : lines) {
    std::string s = CollapseWhitespace(StripAccelerators(line.first));
    std::string t = CollapseWhitespace(StripAccelerators(line.second));
    if (s.empty() || t.empty()) {
      ++stats->dropped_empty;
    } else if (IsFormatOnly(s) || IsFormatOnly(t)) {
      ++stats->dropped_format_only;
    } else if (s == t) {
      ++stats->dropped_identical;
    } else {
      ++stats->kept;
      out->emplace_back(std::move(s), std::move(t));
    }
  }
}

bool PairDeduper::Insert(std::string_view src, std::string_view tgt) {
  std::string key;
  key.reserve(src.size() + tgt.size() + 1);
  key.append(src);
  key += '\0';
  key.append(tgt);
  return seen_.insert(std::move(key)).second;
}

}  // namespace deepnet::data
