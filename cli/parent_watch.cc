#include "cli/parent_watch.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

namespace deepnet::cli {

void ExitWhenParentDies(pid_t expected_parent, std::chrono::milliseconds period) {
  std::thread([expected_parent, period] {
    while (true) {
      const pid_t parent = getppid();
      if (parent != expected_parent) {
        std::fprintf(stderr,
                     "deepnet: the worker daemon (pid %d) that started this trainer is gone "
                     "(parent is now %d); exiting so the job's new attempt runs alone\n",
                     static_cast<int>(expected_parent), static_cast<int>(parent));
        std::fflush(stderr);
        _exit(70);
      }
      std::this_thread::sleep_for(period);
    }
  }).detach();
}

}  // namespace deepnet::cli
