#include "worker/daemon_secrets.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstdlib>

namespace deepnet::worker {

absl::Status KeepSecretsFromTrainers() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return absl::ErrnoToStatus(errno, "prctl(PR_SET_DUMPABLE, 0)");
  }
  ::unsetenv("DEEPNET_TOKEN");
  ::unsetenv("DEEPNET_TOKEN_FILE");
  return absl::OkStatus();
}

}  // namespace deepnet::worker
