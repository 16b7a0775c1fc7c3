#include "worker/trainer_account.h"

#include <pwd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "storage/storage_policy.h"

namespace deepnet::worker {
namespace {

bool LookUpUser(const std::string& name, uid_t* uid, gid_t* gid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwnam_r(name.c_str(), &entry, buffer, sizeof(buffer), &found) != 0 || found == nullptr) {
    return false;
  }
  *uid = found->pw_uid;
  *gid = found->pw_gid;
  return true;
}

bool PrimaryGroupOf(uid_t uid, gid_t* gid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(uid, &entry, buffer, sizeof(buffer), &found) != 0 || found == nullptr) {
    return false;
  }
  *gid = found->pw_gid;
  return true;
}

}  // namespace

absl::Status ConfigureTrainerAccount(const TrainerAccountFlags& flags, uid_t daemon_euid,
                                     SupervisorOptions* supervisor) {
  int64_t uid = flags.uid;
  int64_t gid = flags.gid;
  std::string what = "--trainer-uid";
  if (!flags.user.empty()) {
    if (flags.uid >= 0 || flags.gid >= 0) {
      return absl::InvalidArgumentError(
          "--trainer-user: give it or --trainer-uid/--trainer-gid, not both");
    }
    uid_t u = 0;
    gid_t g = 0;
    if (!LookUpUser(flags.user, &u, &g)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--trainer-user ", flags.user,
          ": no such user (scripts/setup.sh creates deepnet-trainer when run as root)"));
    }
    uid = u;
    gid = g;
    what = absl::StrCat("--trainer-user ", flags.user);
  } else if (uid >= 0 && gid < 0) {
    gid_t g = 0;
    if (!PrimaryGroupOf(static_cast<uid_t>(uid), &g)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--trainer-uid ", uid, ": unknown to the passwd database; give --trainer-gid too"));
    }
    gid = g;
  } else if (uid < 0 && gid >= 0) {
    return absl::InvalidArgumentError("--trainer-gid: needs --trainer-uid");
  }
  if (uid == 0 || gid == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": trainers never run as root (uid ", uid, ", gid ", gid, ")"));
  }
  if (daemon_euid != 0) {
    if (uid >= 0 && static_cast<uid_t>(uid) != daemon_euid) {
      return absl::InvalidArgumentError(absl::StrCat(
          what,
          ": only a daemon running as root can start trainers as another account (this "
          "one runs as uid ",
          daemon_euid, " and runs its trainers as itself)"));
    }
    supervisor->switch_account = false;
    return absl::OkStatus();
  }
  supervisor->switch_account = true;
  supervisor->trainer_uid = uid;
  supervisor->trainer_gid = gid;
  return absl::OkStatus();
}

absl::Status CheckExecutableBy(const std::string& path, uid_t uid, gid_t gid) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const gid_t groups[1] = {gid};
    if (syscall(SYS_setgroups, 1, groups) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0) {
      _exit(2);
    }
    _exit(access(path.c_str(), X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot take uid ", uid, " gid ", gid, " (is this daemon root?)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      path, " is not executable (a file) or searchable (a folder) by uid ", uid, " gid ", gid,
      ": it and every folder above it must be open to the trainer account (a checkout or work "
      "folder under a 0700 folder such as /root is not)"));
}

absl::Status ConfigureStorageRoot(const std::string& root, SupervisorOptions* supervisor) {
  if (root.empty()) return absl::OkStatus();
  absl::StatusOr<storage::StoragePolicy> policy =
      storage::StoragePolicy::Create(root, "--storage-root");
  if (!policy.ok()) return policy.status();
  supervisor->storage_policy = std::make_shared<const storage::StoragePolicy>(*std::move(policy));
  return absl::OkStatus();
}

}  // namespace deepnet::worker
