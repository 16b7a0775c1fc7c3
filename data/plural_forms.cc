#include "data/plural_forms.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace deepnet::data {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Quotes a prefix of hostile text for an error message.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out = "\"";
  for (char c : s.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  return out + (s.size() > kMax ? "...\"" : "\"");
}

}  // namespace

// Recursive descent over gettext's plural.y grammar, one function per precedence level. Depth
// is bounded twice: depth_ caps the recursion while parsing, and each node's depth is checked so
// that evaluation (also recursive) stays shallow.
class PluralRule::Parser {
 public:
  Parser(std::string_view text, std::vector<Node>* nodes) : text_(text), nodes_(nodes) {}

  absl::StatusOr<int32_t> ParseAll() {
    absl::StatusOr<int32_t> root = Ternary();
    if (!root.ok()) return root;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text");
    return root;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("plural expression ", Quote(text_), ": ", Absl(what), " at offset ", pos_));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  // Consumes `token` (after spaces) if it is next; "<" does not match the start of "<=".
  bool Accept(std::string_view token) {
    SkipSpace();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    const size_t next = pos_ + token.size();
    if (token.size() == 1 && next < text_.size() && text_[next] == '=' &&
        (token == "<" || token == ">" || token == "!" || token == "=")) {
      return false;
    }
    pos_ = next;
    return true;
  }
  absl::StatusOr<int32_t> Add(Op op, int32_t a, int32_t b = -1, int32_t c = -1) {
    int depth = 0;
    for (int32_t child : {a, b, c}) {
      if (child >= 0) depth = std::max(depth, depths_[static_cast<size_t>(child)]);
    }
    if (depth + 1 > kMaxDepth) return Error(absl::StrCat("nested deeper than ", kMaxDepth));
    Node node;
    node.op = op;
    node.child[0] = a;
    node.child[1] = b;
    node.child[2] = c;
    nodes_->push_back(node);
    depths_.push_back(depth + 1);
    return static_cast<int32_t>(nodes_->size() - 1);
  }

  absl::StatusOr<int32_t> Ternary() {
    if (++depth_ > kMaxDepth) return Error(absl::StrCat("nested deeper than ", kMaxDepth));
    absl::StatusOr<int32_t> cond = Binary(0);
    if (!cond.ok() || !Accept("?")) {
      --depth_;
      return cond;
    }
    absl::StatusOr<int32_t> then = Ternary();
    if (!then.ok()) return then;
    if (!Accept(":")) return Error("expected ':'");
    absl::StatusOr<int32_t> otherwise = Ternary();
    if (!otherwise.ok()) return otherwise;
    --depth_;
    return Add(Op::kIf, *cond, *then, *otherwise);
  }

  // Binary operators by precedence level, loosest first; all left-associative.
  absl::StatusOr<int32_t> Binary(int level) {
    struct Level {
      std::string_view token[4];
      Op op[4];
    };
    static constexpr Level kLevels[] = {
        {{"||"}, {Op::kOr}},
        {{"&&"}, {Op::kAnd}},
        {{"==", "!="}, {Op::kEq, Op::kNe}},
        {{"<=", ">=", "<", ">"}, {Op::kLe, Op::kGe, Op::kLt, Op::kGt}},
        {{"+", "-"}, {Op::kAdd, Op::kSub}},
        {{"*", "/", "%"}, {Op::kMul, Op::kDiv, Op::kMod}},
    };
    constexpr int kNumLevels = sizeof(kLevels) / sizeof(kLevels[0]);
    if (level == kNumLevels) return Unary();
    absl::StatusOr<int32_t> left = Binary(level + 1);
    while (left.ok()) {
      int matched = -1;
      for (int i = 0; i < 4 && !kLevels[level].token[i].empty(); ++i) {
        if (Accept(kLevels[level].token[i])) {
          matched = i;
          break;
        }
      }
      if (matched < 0) break;
      absl::StatusOr<int32_t> right = Binary(level + 1);
      if (!right.ok()) return right;
      left = Add(kLevels[level].op[matched], *left, *right);
    }
    return left;
  }

  absl::StatusOr<int32_t> Unary() {
    if (!Accept("!")) return Primary();
    if (++depth_ > kMaxDepth) return Error(absl::StrCat("nested deeper than ", kMaxDepth));
    absl::StatusOr<int32_t> operand = Unary();
    --depth_;
    if (!operand.ok()) return operand;
    return Add(Op::kNot, *operand);
  }

  absl::StatusOr<int32_t> Primary() {
    SkipSpace();
    if (pos_ == text_.size()) return Error("unexpected end");
    const char c = text_[pos_];
    if (c == 'n') {
      ++pos_;
      return Add(Op::kVar, -1);
    }
    if (c >= '0' && c <= '9') {
      uint64_t value = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
        if (value > (UINT64_MAX - digit) / 10) return Error("integer overflow");
        value = value * 10 + digit;
        ++pos_;
      }
      absl::StatusOr<int32_t> node = Add(Op::kConst, -1);
      if (node.ok()) (*nodes_)[static_cast<size_t>(*node)].value = value;
      return node;
    }
    if (c == '(') {
      ++pos_;
      absl::StatusOr<int32_t> inner = Ternary();
      if (!inner.ok()) return inner;
      if (!Accept(")")) return Error("expected ')'");
      return inner;
    }
    return Error(absl::StrCat("unexpected character ", Quote(text_.substr(pos_, 1))));
  }

  std::string_view text_;
  std::vector<Node>* nodes_;
  std::vector<int> depths_;  // [node]
  size_t pos_ = 0;
  int depth_ = 0;
};

absl::StatusOr<PluralRule> PluralRule::Parse(std::string_view expression, int nplurals) {
  if (nplurals < 1 || nplurals > kMaxPlurals) {
    return absl::InvalidArgumentError(
        absl::StrCat("nplurals=", nplurals, " is outside [1, ", kMaxPlurals, "]"));
  }
  if (expression.size() > kMaxExpressionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("plural expression of ", expression.size(),
                                                   " bytes exceeds ", kMaxExpressionBytes));
  }
  PluralRule rule;
  rule.nplurals_ = nplurals;
  Parser parser(expression, &rule.nodes_);
  absl::StatusOr<int32_t> root = parser.ParseAll();
  if (!root.ok()) return root.status();
  // Add() appends parents after their children, so the root is the last node.
  if (*root != static_cast<int32_t>(rule.nodes_.size()) - 1) {
    return absl::InternalError("plural parser: root is not the last node");
  }
  return rule;
}

absl::StatusOr<PluralRule> PluralRule::ParseHeader(std::string_view plural_forms) {
  // As gettext's extract_plural_expression: find "nplurals=" and "plural=" anywhere (so a
  // doubled "Plural-Forms: Plural-Forms: ..." still works), read the count after optional
  // spaces, and take the expression up to ';' or a line end (plural.y's lexer stops there).
  const size_t nplurals_at = plural_forms.find("nplurals=");
  const size_t plural_at = plural_forms.find("plural=");
  if (nplurals_at == std::string_view::npos || plural_at == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("Plural-Forms ", Quote(plural_forms), " lacks ",
                     nplurals_at == std::string_view::npos ? "nplurals=" : "plural="));
  }
  std::string_view count = plural_forms.substr(nplurals_at + 9);
  while (!count.empty() && IsSpace(count.front())) count.remove_prefix(1);
  size_t digits = 0;
  int nplurals = 0;
  while (digits < count.size() && digits < 3 && count[digits] >= '0' && count[digits] <= '9') {
    nplurals = nplurals * 10 + (count[digits++] - '0');
  }
  const bool more_digits = digits < count.size() && count[digits] >= '0' && count[digits] <= '9';
  if (digits == 0 || more_digits || nplurals < 1 || nplurals > kMaxPlurals) {
    return absl::InvalidArgumentError(absl::StrCat("Plural-Forms nplurals=", Quote(count),
                                                   " is not an integer in [1, ", kMaxPlurals, "]"));
  }
  std::string_view expression = plural_forms.substr(plural_at + 7);
  expression = expression.substr(0, expression.find_first_of(";\n"));
  return Parse(Trim(expression), nplurals);
}

PluralRule PluralRule::Germanic() {
  PluralRule rule;
  rule.nplurals_ = 2;
  rule.nodes_ = {Node{Op::kVar}, Node{Op::kConst, 1}, Node{Op::kNe, 0, {0, 1, -1}}};
  return rule;
}

absl::StatusOr<uint64_t> PluralRule::Evaluate(uint64_t n) const {
  if (nodes_.empty()) return absl::FailedPreconditionError("empty plural rule");
  return EvaluateNode(static_cast<int32_t>(nodes_.size()) - 1, n);
}

absl::StatusOr<int> PluralRule::FormIndex(uint64_t n) const {
  absl::StatusOr<uint64_t> value = Evaluate(n);
  if (!value.ok()) return value.status();
  if (*value >= static_cast<uint64_t>(nplurals_)) {
    return absl::OutOfRangeError(
        absl::StrCat("plural rule gives form ", *value, " for n=", n, " but nplurals=", nplurals_));
  }
  return static_cast<int>(*value);
}

// Recursion depth is bounded by kMaxDepth (checked when the tree was built).
absl::StatusOr<uint64_t> PluralRule::EvaluateNode(int32_t index, uint64_t n) const {
  const Node& node = nodes_[static_cast<size_t>(index)];
  switch (node.op) {
    case Op::kVar:
      return n;
    case Op::kConst:
      return node.value;
    default:
      break;
  }
  absl::StatusOr<uint64_t> a = EvaluateNode(node.child[0], n);
  if (!a.ok()) return a;
  // Only the branch taken is evaluated, so "n != 0 && 10 / n" and "n ? 1 / n : 0" are safe.
  if (node.op == Op::kNot) return uint64_t{*a == 0};
  if (node.op == Op::kAnd && *a == 0) return uint64_t{0};
  if (node.op == Op::kOr && *a != 0) return uint64_t{1};
  if (node.op == Op::kIf) return EvaluateNode(node.child[*a != 0 ? 1 : 2], n);
  absl::StatusOr<uint64_t> b = EvaluateNode(node.child[1], n);
  if (!b.ok()) return b;
  switch (node.op) {
    case Op::kMul:
      return *a * *b;
    case Op::kDiv:
    case Op::kMod:
      if (*b == 0) {
        return absl::InvalidArgumentError(absl::StrCat("plural rule divides by zero for n=", n));
      }
      return node.op == Op::kDiv ? *a / *b : *a % *b;
    case Op::kAdd:
      return *a + *b;
    case Op::kSub:
      return *a - *b;
    case Op::kLt:
      return uint64_t{*a < *b};
    case Op::kLe:
      return uint64_t{*a <= *b};
    case Op::kGt:
      return uint64_t{*a > *b};
    case Op::kGe:
      return uint64_t{*a >= *b};
    case Op::kEq:
      return uint64_t{*a == *b};
    case Op::kNe:
      return uint64_t{*a != *b};
    case Op::kAnd:
    case Op::kOr:
      return uint64_t{*b != 0};
    default:
      return absl::InternalError("plural rule: unknown operator");
  }
}

}  // namespace deepnet::data
