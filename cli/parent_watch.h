#pragma once

#include <sys/types.h>

#include <chrono>

namespace deepnet::cli {

// A trainer started by deepnet-worker must not outlive it: with the daemon gone nobody reports
// its exit or stops it, and the coordinator restarts its job elsewhere, so an orphan would go on
// training (and writing checkpoints into the job's folder) beside the new attempt. Starts a
// detached thread that checks every `period` whether this process's parent is still
// `expected_parent`; once it is not (the parent died and the process was re-parented), writes
// one line to stderr and ends the process at once with exit code 70, without checkpointing
// (the coordinator has moved on). Returns at once; a mismatch at the first check exits too.
void ExitWhenParentDies(pid_t expected_parent, std::chrono::milliseconds period);

}  // namespace deepnet::cli
