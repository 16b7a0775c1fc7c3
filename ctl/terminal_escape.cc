#include "ctl/terminal_escape.h"

#include <cstdio>

namespace deepnet::ctl {

EscapingStreambuf::~EscapingStreambuf() { sync(); }

bool EscapingStreambuf::Put(const char* text, int n) { return target_->sputn(text, n) == n; }

bool EscapingStreambuf::FlushPending() {
  if (!pending_c2_) return true;
  pending_c2_ = false;
  const char c2 = static_cast<char>(0xC2);
  return Put(&c2, 1);
}

EscapingStreambuf::int_type EscapingStreambuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  const unsigned char c = static_cast<unsigned char>(traits_type::to_char_type(ch));
  char text[8];
  if (pending_c2_) {
    pending_c2_ = false;
    if (c >= 0x80 && c <= 0x9F) {  // U+0080..U+009F: a C1 control.
      std::snprintf(text, sizeof(text), "\\u%04x", static_cast<unsigned>(c));
      return Put(text, 6) ? ch : traits_type::eof();
    }
    const char c2 = static_cast<char>(0xC2);
    if (!Put(&c2, 1)) return traits_type::eof();
  }
  if (c == 0xC2) {
    pending_c2_ = true;
    return ch;
  }
  if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
    std::snprintf(text, sizeof(text), "\\x%02x", static_cast<unsigned>(c));
    return Put(text, 4) ? ch : traits_type::eof();
  }
  const char plain = static_cast<char>(c);
  return Put(&plain, 1) ? ch : traits_type::eof();
}

int EscapingStreambuf::sync() {
  if (!FlushPending()) return -1;
  return target_->pubsync();
}

}  // namespace deepnet::ctl
