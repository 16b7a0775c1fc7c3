#include "comm/mpi_launch_check.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace deepnet::comm {

absl::Status CheckMpiLaunch(const LaunchEnv& env,
                            const std::function<const char*(const char*)>& getenv) {
  // DetectLaunchEnv names the launcher "slurm" when only srun's own variables are there: no
  // PMIx rank (--mpi=pmix) and no OMPI_COMM_WORLD_* (mpirun). The batch shell has SLURM_PROCID
  // too but no SLURM_STEP_ID; a single MPI process there starts as a singleton.
  const char* step = getenv("SLURM_STEP_ID");
  if (env.launcher != "slurm" || step == nullptr || step[0] == '\0') return absl::OkStatus();
  const char* type = getenv("SLURM_MPI_TYPE");
  const std::string plugin = type != nullptr && type[0] != '\0' ? type : "none";
  return absl::FailedPreconditionError(absl::StrCat(
      "parallel.backend: mpi under srun needs srun --mpi=pmix: this task was started with --mpi=",
      plugin,
      ", which gives Open MPI no PMIx server to find its peers (Debian's Open MPI has no PMI-2 "
      "support). Use srun --mpi=pmix (DEEPNET_SRUN_MPI=pmix for "
      "deploy/slurm/deepnet-standalone.sbatch), mpirun inside the allocation, or "
      "parallel.backend: gloo"));
}

}  // namespace deepnet::comm
