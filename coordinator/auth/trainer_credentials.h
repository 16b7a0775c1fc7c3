#pragma once
// Trainer credentials: what a trainer presents to the coordinator's Rendezvous service. Each is
// minted by the coordinator for one rank of one attempt of one job, handed to the worker with the
// rank's assignment and to the trainer in its environment, and good only for that attempt's
// rendezvous scope: never for the job or worker services (they do not know it), never for another
// job or attempt, and useless once the attempt ends (its scope is dropped). The worker's own
// token never reaches a trainer.
//
// A credential is `dnt1:<job id>:<attempt>:<rank>:<mac>`, the MAC an HMAC-SHA256 over the rest
// under a key drawn at random when the coordinator starts; so nothing is stored per credential,
// and a restarted coordinator (a new key) accepts none minted before. Trainers use the
// rendezvous only while they start, before any restart could matter (docs/OPERATIONS.md,
// "Threat model").

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace deepnet::coordinator {

// What a trainer credential is good for.
struct TrainerGrant {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
};

class TrainerCredentials {
 public:
  // With a fresh random key; INTERNAL when the random source fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TrainerCredentials>> Create();
  // With `key` (tests).
  explicit TrainerCredentials(std::string key) : key_(std::move(key)) {}

  // The credential of rank `rank` of attempt `attempt` of job `job_id`.
  std::string Mint(absl::string_view job_id, int attempt, int rank) const;
  // What `token` grants, or UNAUTHENTICATED when it is not a credential minted with this key
  // (malformed, forged, or from before a restart). Takes time independent of where a forged
  // MAC differs.
  [[nodiscard]] absl::StatusOr<TrainerGrant> Verify(absl::string_view token) const;

  // Whether `token` has a trainer credential's form (the "dnt1:" prefix), so a service can tell
  // a trainer's call from one made with a tokens-file token.
  static bool LooksLikeCredential(absl::string_view token);

 private:
  std::string Mac(absl::string_view payload) const;

  const std::string key_;
};

}  // namespace deepnet::coordinator
