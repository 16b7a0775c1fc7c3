// A worker daemon stopped with SIGTERM mid-job (Kubernetes eviction, systemctl stop, Slurm):
// it tells the coordinator it is draining, stops its trainer with SIGTERM (which checkpoints
// and exits 143), reports that ending and exits 0. The coordinator restarts the job on the
// other worker from that checkpoint (recovery cause WORKER_DRAINED, not counted against
// max_restarts) and never gives the stopping worker an attempt.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool GoneOrZombie(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  return Slurp("/proc/" + std::to_string(pid) + "/stat").find(") Z") != std::string::npos;
}

TEST(DrainTest, SigtermedWorkerDrainsAndItsJobResumesOnTheOtherFromItsCheckpoint) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.Log("coordinator.1.log");
  std::unique_ptr<v1::JobService::Stub> jobs = cluster.Jobs();
  const auto logs = [&] {
    std::string text = cluster.Log("coordinator.1.log") + cluster.Log("worker-w1.log") +
                       cluster.Log("worker-w2.log");
    return text.size() > 8000 ? text.substr(text.size() - 8000) : text;
  };
  // max_restarts 0: the restart after a drain must not need one. every_steps 0: the only
  // checkpoint is the one written when the trainer is stopped.
  const std::string dir = cluster.UserDir("alice") + "/ckpt-drain";
  cluster.StartWorker("w1", 1, {"--stop-grace", "120"});
  std::string id;
  ASSERT_TRUE(
      SubmitJobAs(*jobs, SyntheticJobYaml(dir, 100000, 0, "{max_restarts: 0}", 1, 1), &id).ok());
  ASSERT_TRUE(WaitFor([&] { return GetJobAs(*jobs, id).step() >= 3; }, std::chrono::seconds(240)))
      << logs();
  cluster.StartWorker("w2", 1);
  ASSERT_TRUE(WaitFor(
      [&] { return cluster.Log("worker-w2.log").find("registered as") != std::string::npos; },
      std::chrono::seconds(60)))
      << logs();

  const pid_t w1 = cluster.WorkerPid("w1");
  ASSERT_EQ(kill(w1, SIGTERM), 0);
  ASSERT_TRUE(
      WaitFor([&] { return GetJobAs(*jobs, id).attempt() == 2; }, std::chrono::seconds(120)))
      << logs();
  ASSERT_TRUE(WaitFor([&] { return GetJobAs(*jobs, id).state() == v1::JOB_STATE_RUNNING; },
                      std::chrono::seconds(240)))
      << GetJobAs(*jobs, id).message() << "\n"
      << logs();
  const v1::Job job = GetJobAs(*jobs, id);
  EXPECT_EQ(job.recovery_cause(), v1::RECOVERY_CAUSE_WORKER_DRAINED);
  EXPECT_EQ(job.restarts(), 0);  // not counted against max_restarts
  ASSERT_EQ(job.placement_size(), 1);
  EXPECT_EQ(job.placement(0).worker_id(), "w2");
  // The stopping worker exits by itself once its trainer's ending is reported.
  EXPECT_TRUE(WaitFor([&] { return GoneOrZombie(w1); }, std::chrono::seconds(60))) << logs();

  // Attempt 1 wrote its checkpoint when stopped; attempt 2 resumed from it.
  const std::string stopped =
      Slurp(cluster.dir() + "/work-w1/" + id + "/attempt-1/rank-0.stderr.log");
  EXPECT_THAT(stopped, HasSubstr("stopped by SIGTERM at step "));
  EXPECT_THAT(stopped, HasSubstr(": checkpoint written ("));
  const size_t at = stopped.find("stopped by SIGTERM at step ");
  ASSERT_NE(at, std::string::npos) << stopped;
  const std::string step = stopped.substr(at + 27, stopped.find(':', at) - at - 27);
  // Its "resume" event (JSON); RUNNING may come from the heartbeat before it is written.
  const std::string resumed_log = cluster.dir() + "/work-w2/" + id + "/attempt-2/rank-0.stdout.log";
  EXPECT_TRUE(WaitFor(
      [&] {
        return Slurp(resumed_log).find("resumed from step " + step + " ") != std::string::npos;
      },
      std::chrono::seconds(120)))
      << "stopped at step " << step << "\n"
      << Slurp(resumed_log) << logs();
  // w1 was told the job's first attempt only: no attempt 2 ever went to the draining worker.
  const std::string w1_log = cluster.Log("worker-w1.log");
  EXPECT_THAT(w1_log, HasSubstr("told the coordinator this worker is draining (signal 15"));
  EXPECT_THAT(w1_log, Not(HasSubstr("attempt 2")));
  EXPECT_THAT(cluster.Log("coordinator.1.log"), HasSubstr("worker w1 is shutting down"));

  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  v1::Job cancelled;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, kAliceToken, std::chrono::seconds(30));
  ASSERT_TRUE(jobs->CancelJob(&context, cancel, &cancelled).ok());
  ASSERT_TRUE(WaitFor([&] { return GetJobAs(*jobs, id).state() == v1::JOB_STATE_CANCELLED; },
                      std::chrono::seconds(60)))
      << logs();
  // The rank's exit event says its state was in a checkpoint when it stopped.
  bool described = false;
  for (const v1::JobEvent& event : JobEventsAs(*jobs, id)) {
    if (event.worker_id() == "w1" && event.type() == v1::JOB_EVENT_TYPE_RANK_EXITED) {
      EXPECT_THAT(event.message(), HasSubstr("stopped with its state in the checkpoint of step"));
      described = true;
    }
  }
  EXPECT_TRUE(described) << logs();
}

}  // namespace
}  // namespace deepnet::testing
