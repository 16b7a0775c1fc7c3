#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::data {

/// A gettext plural rule: `nplurals` and the C-like expression that maps a count n to the index
/// of a plural form (GNU gettext manual, "Plural forms"). The grammar is gettext's plural.y:
/// n, decimal integers, parentheses, unary !, binary * / % + - < <= > >= == != && ||, and ?:,
/// with C precedence. Evaluation is in unsigned 64-bit arithmetic as in gettext (which uses
/// unsigned long); division or modulo by zero is an error rather than gettext's SIGFPE.
/// Immutable after Parse; safe for concurrent use. Cheap to copy.
class PluralRule {
 public:
  // Parser limits, so that hostile catalogues cannot exhaust the stack or memory.
  static constexpr size_t kMaxExpressionBytes = 1024;
  static constexpr int kMaxDepth = 64;  // Expression tree depth.
  static constexpr int kMaxPlurals = 16;

  /// Parses the value of a catalogue header's `Plural-Forms:` field, e.g.
  /// "nplurals=2; plural=(n != 1);". Whatever follows the expression's ';' is ignored, as gettext
  /// does. Errors say what is wrong and where.
  [[nodiscard]] static absl::StatusOr<PluralRule> ParseHeader(std::string_view plural_forms);
  /// Parses a bare expression such as "n%10==1 ? 0 : 1" for a rule with `nplurals` forms.
  [[nodiscard]] static absl::StatusOr<PluralRule> Parse(std::string_view expression, int nplurals);
  /// gettext's default rule when a catalogue declares none: nplurals=2; plural=n != 1.
  static PluralRule Germanic();

  /// The expression's value for n; an error on division or modulo by zero.
  [[nodiscard]] absl::StatusOr<uint64_t> Evaluate(uint64_t n) const;
  /// The form index for n; an error when the value is not below nplurals() (a rule that does
  /// not match its nplurals) or on division by zero.
  [[nodiscard]] absl::StatusOr<int> FormIndex(uint64_t n) const;

  int nplurals() const { return nplurals_; }

 private:
  enum class Op : uint8_t {
    kVar,
    kConst,
    kNot,
    kMul,
    kDiv,
    kMod,
    kAdd,
    kSub,
    kLt,
    kLe,
    kGt,
    kGe,
    kEq,
    kNe,
    kAnd,
    kOr,
    kIf,
  };
  struct Node {
    Op op;
    uint64_t value = 0;               // kConst only.
    int32_t child[3] = {-1, -1, -1};  // Indices into nodes_.
  };
  class Parser;

  absl::StatusOr<uint64_t> EvaluateNode(int32_t index, uint64_t n) const;

  int nplurals_ = 2;
  std::vector<Node> nodes_;  // [node]; the root is the last one.
};

}  // namespace deepnet::data
