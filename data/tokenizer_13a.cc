#include "data/tokenizer_13a.h"

#include "data/unicode_text.h"

namespace deepnet::data {
namespace {

// Python's str.replace(from, to) on *text: every non-overlapping occurrence, left to right.
void ReplaceAll(std::string_view from, std::string_view to, std::string* text,
                std::string* scratch) {
  size_t pos = text->find(from.data(), 0, from.size());
  if (pos == std::string::npos) return;
  scratch->clear();
  size_t start = 0;
  while (pos != std::string::npos) {
    scratch->append(*text, start, pos - start);
    scratch->append(to.data(), to.size());
    start = pos + from.size();
    pos = text->find(from.data(), start, from.size());
  }
  scratch->append(*text, start, std::string::npos);
  text->swap(*scratch);
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsDotOrComma(char c) { return c == '.' || c == ','; }

// The character class [\{-\~\[-\` -\&\(-\+\:-\@\/] of 13a's first substitution.
bool IsSeparatedPunctuation(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= 0x20 && c <= 0x26) ||  // space ! " # $ % &
         (c >= 0x28 && c <= 0x2B) ||  // ( ) * +
         c == 0x2F ||                 // /
         (c >= 0x3A && c <= 0x40) ||  // : ; < = > ? @
         (c >= 0x5B && c <= 0x60) ||  // [ \ ] ^ _ `
         (c >= 0x7B && c <= 0x7E);    // { | } ~
}

}  // namespace

const std::vector<std::string_view>& Tokenizer13a::Tokenize(std::string_view line) {
  text_.assign(line.data(), line.size());

  // Language-independent part.
  ReplaceAll("<skipped>", "", &text_, &scratch_);
  if (text_.find('\n') != std::string::npos) {
    ReplaceAll("-\n", "", &text_, &scratch_);
    ReplaceAll("\n", " ", &text_, &scratch_);
  }
  if (text_.find('&') != std::string::npos) {
    ReplaceAll("&quot;", "\"", &text_, &scratch_);
    ReplaceAll("&amp;", "&", &text_, &scratch_);
    ReplaceAll("&lt;", "<", &text_, &scratch_);
    ReplaceAll("&gt;", ">", &text_, &scratch_);
  }

  // Each pass writes through a raw pointer into scratch_, sized for the worst case first:
  // per-character push_back costs several times more.
  // Pad, and put spaces around each separated punctuation character (at most 3 bytes each).
  scratch_.resize(3 * text_.size() + 2);
  char* out = scratch_.data();
  *out++ = ' ';
  for (const char c : text_) {
    if (IsSeparatedPunctuation(c)) {
      out[0] = ' ';
      out[1] = c;
      out[2] = ' ';
      out += 3;
    } else {
      *out++ = c;
    }
  }
  *out++ = ' ';
  scratch_.resize(out - scratch_.data());
  text_.swap(scratch_);

  // Each remaining substitution matches two characters and writes four: `match(a, b)` says
  // whether the pair at (i, i + 1) matches, `emit` writes the replacement. After a match the
  // scan resumes behind the pair, as Python's re.sub does.
  auto substitute = [this](auto match, auto emit) {
    const size_t n = text_.size();
    scratch_.resize(2 * n);
    const char* in = text_.data();
    char* out = scratch_.data();
    size_t i = 0;
    while (i < n) {
      if (i + 1 < n && match(in[i], in[i + 1])) {
        emit(in[i], in[i + 1], out);
        out += 4;
        i += 2;
      } else {
        *out++ = in[i++];
      }
    }
    scratch_.resize(out - scratch_.data());
    text_.swap(scratch_);
  };
  auto write4 = [](char* out, char a, char b, char c, char d) {
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
  };
  if (text_.find_first_of(".,") != std::string::npos) {
    // Period and comma unless preceded by a digit: ([^0-9])([.,]) -> "\1 \2 ".
    substitute([](char a, char b) { return !IsAsciiDigit(a) && IsDotOrComma(b); },
               [&](char a, char b, char* out) { write4(out, a, ' ', b, ' '); });
    // Period and comma unless followed by a digit: ([.,])([^0-9]) -> " \1 \2".
    substitute([](char a, char b) { return IsDotOrComma(a) && !IsAsciiDigit(b); },
               [&](char a, char b, char* out) { write4(out, ' ', a, ' ', b); });
  }
  if (text_.find('-') != std::string::npos) {
    // Dash preceded by a digit: ([0-9])(-) -> "\1 \2 ".
    substitute([](char a, char b) { return IsAsciiDigit(a) && b == '-'; },
               [&](char a, char b, char* out) { write4(out, a, ' ', b, ' '); });
  }

  tokens_.clear();
  SplitPythonWhitespace(text_, &tokens_);
  return tokens_;
}

std::string Tokenizer13a::TokenizeToString(std::string_view line) {
  Tokenizer13a tokenizer;
  std::string joined;
  for (const std::string_view token : tokenizer.Tokenize(line)) {
    if (!joined.empty()) joined.push_back(' ');
    joined.append(token.data(), token.size());
  }
  return joined;
}

}  // namespace deepnet::data
