#pragma once
// deepnetctl prints what others wrote: job names and labels, state reasons, trainers' exit
// messages and stderr tails, whole trainer logs (`deepnetctl logs`). Any of them may hold
// control characters, and an escape sequence in a job's log would then act on the terminal of
// whoever reads it, an admin running `deepnetctl list --all-users` or `logs` included.
// EscapingStreambuf sits between deepnetctl's streams and the terminal (ctl/main.cc) and writes
// every control character except newline and tab as text: C0 and DEL as \xNN, C1 (U+0080 to
// U+009F, which some terminals take as 8-bit escapes) as \u00NN. Every other byte passes
// unchanged, invalid UTF-8 included.

#include <streambuf>

namespace deepnet::ctl {

class EscapingStreambuf final : public std::streambuf {
 public:
  // Writes to `target`, which must outlive this object.
  explicit EscapingStreambuf(std::streambuf* target) : target_(target) {}
  ~EscapingStreambuf() override;
  EscapingStreambuf(const EscapingStreambuf&) = delete;
  EscapingStreambuf& operator=(const EscapingStreambuf&) = delete;

 protected:
  int_type overflow(int_type ch) override;
  int sync() override;

 private:
  bool Put(const char* text, int n);
  bool FlushPending();

  std::streambuf* target_;
  bool pending_c2_ = false;  // A 0xC2 byte held back: it may start a C1 control.
};

}  // namespace deepnet::ctl
