// data.random_tokens: the schema's checks (the generator, data/random_token_task.cc, trusts them).
#include "absl/strings/str_cat.h"
#include "job/job_config.h"

namespace deepnet::job {
namespace {

constexpr int64_t kMaxSymbols = SpecCaps::kRandomSymbols;
constexpr int64_t kMaxPairs = SpecCaps::kRandomPairs;
constexpr int64_t kMaxLength = SpecCaps::kRandomLength;

absl::Status OutOfRange(const char* field, int64_t lo, int64_t hi, int64_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be in [", lo, ", ", hi, "] (got ", got, ")"));
}

}  // namespace

absl::Status ValidateRandomTokens(const RandomTokensConfig& o) {
  if (o.vocab_size < 2 || o.vocab_size > kMaxSymbols) {
    return OutOfRange("vocab_size", 2, kMaxSymbols, o.vocab_size);
  }
  if (o.pairs < 1 || o.pairs > kMaxPairs) return OutOfRange("pairs", 1, kMaxPairs, o.pairs);
  if (o.min_len < 1 || o.min_len > kMaxLength)
    return OutOfRange("min_len", 1, kMaxLength, o.min_len);
  if (o.max_len < o.min_len || o.max_len > kMaxLength) {
    return OutOfRange("max_len", o.min_len, kMaxLength, o.max_len);
  }
  return absl::OkStatus();
}

}  // namespace deepnet::job
