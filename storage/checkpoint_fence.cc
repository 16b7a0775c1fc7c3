#include "storage/checkpoint_fence.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <filesystem>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "storage/atomic_file.h"
#include "storage/guarded_read.h"
#include "storage/retry_on_eintr.h"

namespace deepnet::storage {
namespace {

constexpr char kHeaderV1[] = "deepnet-checkpoint-fence 1";  // No uid line.
constexpr char kHeader[] = "deepnet-checkpoint-fence 2";
constexpr size_t kMaxFenceFileBytes = 4096;
constexpr char kFencedOutPayload[] = "deepnet.storage/fenced-out";

std::string FencePath(const std::string& dir) {
  return (std::filesystem::path(dir) / kFenceFileName).string();
}

absl::Status FencedOut(const std::string& message) {
  absl::Status status = absl::AbortedError(message);
  status.SetPayload(kFencedOutPayload, absl::Cord("1"));
  return status;
}

std::string Serialize(const FenceToken& token) {
  if (token.job_uid.empty()) {
    return absl::StrCat(kHeaderV1, "\njob ", token.job_id, "\nattempt ", token.attempt, "\n");
  }
  return absl::StrCat(kHeader, "\njob ", token.job_id, "\nuid ", token.job_uid, "\nattempt ",
                      token.attempt, "\n");
}

}  // namespace

std::string FenceToken::ToString() const {
  if (!fenced()) return "a standalone run (attempt 0)";
  return absl::StrCat("job ", job_id.empty() ? "(no id)" : job_id, " attempt ", attempt);
}

absl::StatusOr<std::optional<FenceToken>> ReadFence(const std::string& dir) {
  const std::string path = FencePath(dir);
  // A FENCE is four short lines; a link, FIFO or device there is refused, not followed.
  absl::StatusOr<std::string> text = ReadGuardedFile(path, kMaxFenceFileBytes);
  if (absl::IsNotFound(text.status())) return std::optional<FenceToken>();
  if (!text.ok()) return text.status();
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  FenceToken token;
  // Version 2 has a uid line after the job line; version 1 (older trainers) has none.
  const bool v2 = !lines.empty() && lines[0] == kHeader;
  if (v2 && lines.size() > 2 && absl::StartsWith(lines[2], "uid ") && lines[2].size() > 4) {
    token.job_uid = lines[2].substr(4);
    lines.erase(lines.begin() + 2);
  }
  std::string job_id = lines.size() > 1 ? lines[1] : "";
  std::string attempt = lines.size() > 2 ? lines[2] : "";
  if (lines.size() != 4 || (v2 ? token.job_uid.empty() : lines[0] != kHeaderV1) ||
      !lines[3].empty() || !absl::StartsWith(job_id, "job ") ||
      !absl::StartsWith(attempt, "attempt ") ||
      !absl::SimpleAtoi(attempt.substr(8), &token.attempt) || token.attempt < 1) {
    return absl::DataLossError(absl::StrCat(
        path, " is not a checkpoint fence (want \"", kHeader,
        "\", \"job <id>\", \"uid <job uid>\", \"attempt <N>\"); remove it only if no job "
        "writes to ", dir));
  }
  token.job_id = job_id.substr(4);
  return std::optional<FenceToken>(std::move(token));
}

absl::Status CheckAndRecordFenceLocked(const std::string& dir, const FenceToken& token) {
  if (!token.fenced()) return absl::OkStatus();
  if (absl::StrContains(token.job_id, '\n') || absl::StrContains(token.job_uid, '\n')) {
    return absl::InvalidArgumentError(
        "job id and uid of a checkpoint fence must not contain a newline");
  }
  absl::StatusOr<std::optional<FenceToken>> recorded = ReadFence(dir);
  if (!recorded.ok()) return recorded.status();
  if (recorded->has_value()) {
    const FenceToken& owner = **recorded;
    if (owner.job_id != token.job_id) {
      return FencedOut(absl::StrCat("checkpoint folder ", dir, " belongs to job ", owner.job_id,
                                    " (", kFenceFileName, " records ", owner.ToString(),
                                    "), not to job ", token.job_id,
                                    "; give this job its own checkpoint.dir"));
    }
    if (!owner.SameJob(token)) {
      return FencedOut(absl::StrCat(
          "checkpoint folder ", dir, " belongs to an earlier job that had the id ", owner.job_id,
          " (", kFenceFileName, " records uid ", owner.job_uid, "; this job is ", token.job_uid,
          ": the coordinator's database was lost or restored, and ids started again); give "
          "this job its own checkpoint.dir"));
    }
    if (owner.attempt > token.attempt) {
      return FencedOut(absl::StrCat(token.ToString(), " is stale: ", owner.ToString(),
                                    " owns checkpoint folder ", dir,
                                    " now (the coordinator restarted the job); this attempt "
                                    "must not commit"));
    }
    if (owner.attempt == token.attempt) return absl::OkStatus();
  }
  return WriteFileAtomically(FencePath(dir), Serialize(token),
                             absl::StrCat(".tmp-", static_cast<int64_t>(::getpid())));
}

absl::Status ClaimFolder(const std::string& dir, const FenceToken& token) {
  return RunFenced(dir, token, [](const LeaseCheck&) { return absl::OkStatus(); });
}

absl::Status RunFenced(const std::string& dir, const FenceToken& token,
                       const std::function<absl::Status(const LeaseCheck&)>& mutate) {
  if (!token.fenced()) return mutate([] { return absl::OkStatus(); });
  absl::StatusOr<FolderLock> lock = FolderLock::Acquire(dir);
  if (!lock.ok()) return lock.status();
  if (absl::Status held = lock->StillHeld(); !held.ok()) return held;
  if (absl::Status s = CheckAndRecordFenceLocked(dir, token); !s.ok()) return s;
  if (absl::Status held = lock->StillHeld(); !held.ok()) return held;
  return mutate([&lock] { return lock->StillHeld(); });
}

bool IsFencedOut(const absl::Status& status) {
  return status.GetPayload(kFencedOutPayload).has_value();
}

absl::Status WithContext(const absl::Status& status, const std::string& context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(status.message(), context));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace deepnet::storage
