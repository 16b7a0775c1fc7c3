#pragma once
// After a coordinator restart, a job that was STARTING or RUNNING waits (until a deadline) for
// its workers to re-register and report every rank of its attempt, running or exited while the
// coordinator was away. JobReattach keeps what they reported and says what it adds up to;
// JobRun acts on it.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/job_run_state.h"

namespace deepnet::coordinator {

class JobReattach {
 public:
  // What the reports add up to.
  struct Outcome {
    enum class Kind {
      kWaiting,  // some rank has not been reported yet
      kEnded,    // every rank exited while the coordinator was away
      kReadopt,  // some ranks run: re-adopt the attempt (`ranks`)
    };
    Kind kind = Kind::kWaiting;
    bool all_clean = true;  // every exited rank exited with 0
    // "rank R on worker W failed while the coordinator was away" for the first failed rank.
    std::string failed;
    std::vector<RankRun> ranks;  // kReadopt: the attempt's ranks, by rank
  };

  void Begin(JobClock::time_point deadline);
  // The attempt's placement as its PLACED event stored it (rank -> worker). Only the worker
  // that held a rank may report it while reattaching; with none stored (a record from before
  // placements were stored), any worker may.
  void ExpectPlacement(std::vector<std::string> rank_workers);
  // Whether `worker_id` may report `rank` (ExpectPlacement).
  bool Holds(int rank, const std::string& worker_id) const;
  bool active() const { return active_; }
  JobClock::time_point deadline() const { return deadline_; }
  // The running ranks reported so far, by rank.
  const std::map<int, RankView>& running() const { return running_; }

  // A worker listed `view.rank` as running (in `phase`).
  void OnRunning(const RankView& view, TaskPhase phase);
  // A worker reported the rank's exit while the coordinator was away.
  void OnExit(int rank, const std::string& worker_id, bool clean);
  // The worker was lost: the ranks found there will not come back.
  void ForgetWorker(const std::string& worker_id);
  // Stops waiting and forgets everything reported; returns the running ranks found.
  std::map<int, RankView> End();
  // What the reports add up to for an attempt of `world_size` ranks, `data_parallel` wide.
  Outcome Check(int64_t world_size, int64_t data_parallel) const;

 private:
  bool active_ = false;
  JobClock::time_point deadline_;
  std::map<int, RankView> running_;
  std::map<int, TaskPhase> phases_;
  // Ranks that exited while the coordinator was away: rank -> (worker, exited with 0).
  std::map<int, std::pair<std::string, bool>> exits_;
  std::vector<std::string> expected_;  // By rank; empty: no placement stored.
};

}  // namespace deepnet::coordinator
