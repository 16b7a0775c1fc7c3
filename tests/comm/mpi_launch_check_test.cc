#include "comm/mpi_launch_check.h"

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace deepnet::comm {
namespace {

using ::testing::HasSubstr;

// CheckMpiLaunch on the launch environment that DetectLaunchEnv reads from `vars`.
absl::Status Check(const std::map<std::string, std::string>& vars) {
  const std::function<const char*(const char*)> getenv = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<LaunchEnv> env = DetectLaunchEnv(getenv);
  if (!env.ok()) return env.status();
  return CheckMpiLaunch(*env, getenv);
}

TEST(MpiLaunchCheckTest, SrunWithoutPmixIsRefusedWithWhatToUseInstead) {
  absl::Status status = Check({{"SLURM_PROCID", "1"},
                               {"SLURM_NTASKS", "2"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_MPI_TYPE", "pmi2"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--mpi=pmi2"));
  EXPECT_THAT(status.message(), HasSubstr("srun --mpi=pmix"));
  EXPECT_THAT(status.message(), HasSubstr("mpirun inside the allocation"));
  EXPECT_THAT(status.message(), HasSubstr("parallel.backend: gloo"));
  // srun --mpi=none sets no SLURM_MPI_TYPE.
  EXPECT_THAT(
      Check({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "3"}}).message(),
      HasSubstr("--mpi=none"));
}

TEST(MpiLaunchCheckTest, PmixMpirunBatchShellAndSingleProcessAreAccepted) {
  // srun --mpi=pmix
  EXPECT_TRUE(Check({{"PMIX_RANK", "1"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_STEP_ID", "0"},
                     {"SLURM_MPI_TYPE", "pmix"}})
                  .ok());
  // mpirun inside an allocation (its tasks inherit srun-free SLURM_* variables).
  EXPECT_TRUE(Check({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "1"}})
                  .ok());
  // The batch shell itself: SLURM_PROCID but no step.
  EXPECT_TRUE(Check({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).ok());
  EXPECT_TRUE(Check({}).ok());
}

}  // namespace
}  // namespace deepnet::comm
