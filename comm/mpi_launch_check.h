#pragma once

// Whether parallel.backend: mpi can start in this launch environment, checked before
// MPI_Init_thread (which aborts the process where it finds no launcher it understands).

#include <functional>

#include "absl/status/status.h"
#include "comm/launch_env.h"

namespace deepnet::comm {

/// FailedPrecondition for a task of an srun step that was started without PMIx (srun
/// --mpi=none or pmi2: SLURM_STEP_ID set, no PMIX_RANK, no mpirun variables): Open MPI then has
/// no way to find its peers (Debian's has no PMI-2 support), so the message says what to use
/// instead. OK everywhere else (mpirun, srun --mpi=pmix, a single process, the batch shell).
[[nodiscard]] absl::Status CheckMpiLaunch(const LaunchEnv& env,
                                          const std::function<const char*(const char*)>& getenv);

}  // namespace deepnet::comm
