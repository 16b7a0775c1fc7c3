#pragma once

// The fencing token of a checkpoint folder: which job and which attempt of it may commit there.
// The coordinator restarts a job as a new attempt when it loses a worker; the cut-off trainers of
// the old attempt may still be running. Every mutation of the folder (a step folder published,
// `latest` replaced, old checkpoints pruned, stale temporaries removed) happens while holding an
// exclusive lock on DIR/.fence.lock and after checking DIR/FENCE against the writer's token:
//
//   DIR/FENCE        "deepnet-checkpoint-fence 2\njob <job id>\nuid <job uid>\nattempt <N>\n"
//                    (version 1, from trainers without a job uid, has no uid line), written with
//                    WriteFileAtomically: the newest attempt that claimed the folder
//   DIR/.fence.lock  flock(2)ed around every check-and-mutate (released when the process ends,
//                    however it ends), holding its holder's lease: a holder stopped or hung past
//                    its lease loses the lock to the next waiter (storage/folder_lock.h)
//
// A token with attempt 0 (a standalone `deepnet train`, not started by deepnet-worker) is not
// fenced: it neither takes the lock nor checks or changes DIR/FENCE (the folder is the operator's
// to manage, e.g. to continue a finished job by hand), and it adds no files to the folder.
// Thread-safe (each call opens its own descriptor); blocks on I/O and on the lock. The lock is
// flock(2): local file systems, and NFS v4 (where flock is emulated with byte-range locks).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/folder_lock.h"

namespace deepnet::storage {

inline constexpr char kFenceFileName[] = "FENCE";
// The exit code of a `deepnet train` refused by the fence (cli::kExitFencedOut). From the job's
// current attempt it means another job owns the folder: restarting cannot help.
inline constexpr int kFencedOutExitCode = 77;

/// Who writes: the coordinator's job id, job uid and attempt (DEEPNET_JOB_ID, DEEPNET_JOB_UID,
/// DEEPNET_ATTEMPT).
struct FenceToken {
  std::string job_id;
  int64_t attempt = 0;  // >= 1 when started by deepnet-worker; 0: standalone, unfenced.
  // Which job of that id ("<id>@<created ms>", Assignment.job_uid): a job id used again after the
  // coordinator lost its database is another job. Empty: not known (a FENCE of version 1).
  std::string job_uid;

  bool fenced() const { return attempt > 0; }
  std::string ToString() const;  // "job J attempt N" or "a standalone run"
  // The same job: the same id, and the same uid where both know one.
  bool SameJob(const FenceToken& other) const {
    return job_id == other.job_id &&
           (job_uid.empty() || other.job_uid.empty() || job_uid == other.job_uid);
  }
  bool operator==(const FenceToken& other) const {
    return job_id == other.job_id && job_uid == other.job_uid && attempt == other.attempt;
  }
};

/// The token recorded in DIR/FENCE; nullopt when there is none. DataLoss naming the file when it
/// cannot be parsed (it is never written half: remove it by hand only if no job uses DIR).
[[nodiscard]] absl::StatusOr<std::optional<FenceToken>> ReadFence(const std::string& dir);

/// With the folder lock held: refuses `token` when DIR/FENCE records another job (another id,
/// or the same id with another uid), or a newer attempt of this job (ABORTED, IsFencedOut); records `token` when the file is missing or
/// records an older attempt (the newer attempt takes over). Always OK for an unfenced token.
[[nodiscard]] absl::Status CheckAndRecordFenceLocked(const std::string& dir,
                                                     const FenceToken& token);

/// Lock, CheckAndRecordFenceLocked, unlock: a new attempt claims the folder before it reads it.
[[nodiscard]] absl::Status ClaimFolder(const std::string& dir, const FenceToken& token);

/// Asked by a fenced mutation between its steps: OK while the lock's lease holds (always OK for
/// an unfenced token), ABORTED once it was lost (FolderLock::StillHeld).
using LeaseCheck = std::function<absl::Status()>;

/// Lock, CheckAndRecordFenceLocked, then `mutate` with the lock still held (so no newer attempt
/// can claim the folder between the check and the mutation), unlock. The lock's lease is checked
/// before the fence is recorded and again before `mutate`, which gets the check to ask between
/// its own steps: a holder that lost the lock (stopped or hung past its lease) stops changing
/// the folder (ABORTED). Returns the refusal or what `mutate` returned. An unfenced token runs
/// `mutate` without the lock.
[[nodiscard]] absl::Status RunFenced(const std::string& dir, const FenceToken& token,
                                     const std::function<absl::Status(const LeaseCheck&)>& mutate);

/// Whether `status` is a fencing refusal (a stale attempt, or a folder of another job).
bool IsFencedOut(const absl::Status& status);

/// `status` with `context` appended to its message, keeping its code and payloads (so that
/// IsFencedOut still holds).
absl::Status WithContext(const absl::Status& status, const std::string& context);

}  // namespace deepnet::storage
