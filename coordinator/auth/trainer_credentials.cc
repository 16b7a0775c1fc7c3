#include "coordinator/auth/trainer_credentials.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/auth/secrets.h"

namespace deepnet::coordinator {

namespace {

constexpr absl::string_view kPrefix = "dnt1:";
constexpr size_t kKeyBytes = 32;

absl::Status NotACredential(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("invalid trainer credential: ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainerCredentials>> TrainerCredentials::Create() {
  absl::StatusOr<std::string> key = RandomHex(kKeyBytes);
  if (!key.ok()) return key.status();
  return std::make_unique<TrainerCredentials>(std::move(*key));
}

std::string TrainerCredentials::Mac(absl::string_view payload) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), mac, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), length));
}

std::string TrainerCredentials::Mint(absl::string_view job_id, int attempt, int rank) const {
  const std::string payload = absl::StrCat(kPrefix, job_id, ":", attempt, ":", rank);
  return absl::StrCat(payload, ":", Mac(payload));
}

absl::StatusOr<TrainerGrant> TrainerCredentials::Verify(absl::string_view token) const {
  if (!LooksLikeCredential(token)) return NotACredential("no 'dnt1:' prefix");
  // Fields from the right: a job id may itself hold ':'.
  const size_t mac_at = token.rfind(':');
  const absl::string_view payload = token.substr(0, mac_at);
  const size_t rank_at = payload.rfind(':');
  const size_t attempt_at = rank_at == absl::string_view::npos || rank_at == 0
                                ? absl::string_view::npos
                                : payload.rfind(':', rank_at - 1);
  if (attempt_at == absl::string_view::npos || attempt_at < kPrefix.size()) {
    return NotACredential("expected dnt1:JOB:ATTEMPT:RANK:MAC");
  }
  TrainerGrant grant;
  grant.job_id = std::string(payload.substr(kPrefix.size(), attempt_at - kPrefix.size()));
  if (grant.job_id.empty() ||
      !absl::SimpleAtoi(payload.substr(attempt_at + 1, rank_at - attempt_at - 1), &grant.attempt) ||
      !absl::SimpleAtoi(payload.substr(rank_at + 1), &grant.rank)) {
    return NotACredential("expected dnt1:JOB:ATTEMPT:RANK:MAC");
  }
  if (!ConstantTimeEquals(Mac(payload), token.substr(mac_at + 1))) {
    return NotACredential(
        "not minted by this coordinator (forged, or from before it restarted)");
  }
  return grant;
}

bool TrainerCredentials::LooksLikeCredential(absl::string_view token) {
  return absl::StartsWith(token, kPrefix);
}

}  // namespace deepnet::coordinator
