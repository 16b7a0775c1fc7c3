// EscapingStreambuf: what reaches the terminal has no control character but newline and tab.
#include "ctl/terminal_escape.h"

#include <gtest/gtest.h>

#include <ostream>
#include <sstream>
#include <string>

namespace deepnet::ctl {
namespace {

std::string Escaped(const std::string& text) {
  std::ostringstream target;
  {
    EscapingStreambuf escape(target.rdbuf());
    std::ostream out(&escape);
    out << text << std::flush;
  }
  return target.str();
}

TEST(TerminalEscapeTest, TextNewlinesTabsAndUtf8PassUnchanged) {
  EXPECT_EQ(Escaped("step 10\tloss 2.5\n"), "step 10\tloss 2.5\n");
  EXPECT_EQ(Escaped("Öffnen — ½ — 日本"), "Öffnen — ½ — 日本");  // ½ starts with 0xC2 too.
}

TEST(TerminalEscapeTest, C0ControlsAndDelAreWrittenAsHex) {
  EXPECT_EQ(Escaped("a\x1b[2Jb\rc\x07\x7f"), "a\\x1b[2Jb\\x0dc\\x07\\x7f");
  EXPECT_EQ(Escaped(std::string("nul\0end", 7)), "nul\\x00end");
}

TEST(TerminalEscapeTest, C1ControlsAreWrittenAsCodePoints) {
  EXPECT_EQ(Escaped("\xc2\x9b"
                    "31m"),
            "\\u009b31m");
  EXPECT_EQ(Escaped("\xc2\x85"), "\\u0085");
  // A 0xC2 at the very end, or before an ASCII byte (invalid UTF-8), passes as it was.
  EXPECT_EQ(Escaped("x\xc2"), "x\xc2");
  EXPECT_EQ(Escaped("\xc2"
                    "A"),
            "\xc2"
            "A");
}

}  // namespace
}  // namespace deepnet::ctl
