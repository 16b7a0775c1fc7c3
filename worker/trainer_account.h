#pragma once
// Which account the worker daemon's trainers run as (--trainer-user, --trainer-uid,
// --trainer-gid) and where job paths must lie (--storage-root). Torch-free.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "worker/trainer_supervisor.h"

namespace deepnet::worker {

struct TrainerAccountFlags {
  std::string user;  // --trainer-user NAME (its uid and primary gid from the passwd database)
  int64_t uid = -1;  // --trainer-uid
  int64_t gid = -1;  // --trainer-gid (default: the uid's primary group)
};

// Sets supervisor->switch_account and trainer_uid/trainer_gid. A daemon running as root
// (`daemon_euid` 0) switches every trainer to an unprivileged account: the job owner's uid/gid
// when the coordinator sends them, else the one given here (none given: such assignments are
// refused). A non-root daemon runs trainers as itself and can take no other account.
// INVALID_ARGUMENT naming the flag for an unknown user, uid or gid 0, a gid missing, both forms
// given, or an account a non-root daemon cannot take.
[[nodiscard]] absl::Status ConfigureTrainerAccount(const TrainerAccountFlags& flags,
                                                   uid_t daemon_euid,
                                                   SupervisorOptions* supervisor);

// FAILED_PRECONDITION naming the account when it cannot execute `path` (a file) or search it
// (a folder), e.g. under a 0700 folder; checked in a child that takes the account. Needs root.
[[nodiscard]] absl::Status CheckExecutableBy(const std::string& path, uid_t uid, gid_t gid);

// Sets supervisor->storage_policy from --storage-root (empty: none). INVALID_ARGUMENT naming the
// flag when DIR is not an absolute path to a directory.
[[nodiscard]] absl::Status ConfigureStorageRoot(const std::string& root,
                                                SupervisorOptions* supervisor);

}  // namespace deepnet::worker
