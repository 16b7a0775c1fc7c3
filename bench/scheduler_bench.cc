// Gang scheduler benchmark (docs/PERFORMANCE.md). No LibTorch, no RPC: the scheduler core alone.
//   deepnet_bench_scheduler [--workers 512] [--slots 8] [--queued 1000] [--reps 2000] ...
// Prints one JSON object:
//  place_gang_strict:   time to place a P x D gang (Enqueue + Schedule) in a fragmented cluster,
//                       strict order, the gang first in line, `queued` larger jobs behind it.
//  place_gang_backfill: the same with max_overtakes unbounded and the `queued` larger jobs ahead
//                       of the gang (all blocked): each pass walks the whole queue before it.
//  pending_reasons:     Pending() over the backfill queue (`queued` jobs), every 10th repetition.
//  place_gang_scattered: strict, but every slot first held by a 1-rank job and a random
//                       (1 - busy) of them released: free slots scattered, groups must split.
//  stream_small_jobs:   decisions per second for 1-4 rank jobs streaming through a full cluster
//                       with `queued` jobs waiting: each event releases a random running job,
//                       submits a new one and runs Schedule().
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/scheduler/gang_scheduler.h"

namespace {

using deepnet::coordinator::GangRequest;
using deepnet::coordinator::GangScheduler;
using deepnet::coordinator::Placement;
using deepnet::coordinator::SchedulerOptions;
using Clock = std::chrono::steady_clock;

struct Options {
  int workers = 512;
  int slots = 8;
  int queued = 1000;
  int reps = 2000;
  int64_t stages = 16;
  int64_t replicas = 8;
  double busy = 0.6;  // Fraction of slots filled with small jobs before a third are released.
  int stream_events = 200000;
  uint64_t seed = 1;
};

// Fails the benchmark loudly: a broken invariant makes every number meaningless.
void Require(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "scheduler_bench: " << what << "\n";
    std::exit(1);
  }
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0.0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

nlohmann::json Summary(const std::vector<double>& us) {
  return {{"p50_us", Percentile(us, 0.50)},
          {"p99_us", Percentile(us, 0.99)},
          {"max_us", Percentile(us, 1.0)},
          {"samples", us.size()}};
}

GangRequest Gang(std::string id, int64_t p, int64_t d, int priority, uint64_t seq) {
  GangRequest r;
  r.job_id = std::move(id);
  r.pipeline_stages = p;
  r.data_parallel = d;
  r.priority = priority;
  r.submit_seq = seq;
  return r;
}

// A small background job: P x D with P*D <= max_ranks.
GangRequest SmallJob(std::mt19937_64& rng, int max_ranks, std::string id, int priority,
                     uint64_t seq) {
  std::uniform_int_distribution<int64_t> pick(1, max_ranks);
  int64_t p, d;
  do {
    p = pick(rng);
    d = pick(rng);
  } while (p * d > max_ranks);
  return Gang(std::move(id), p, d, priority, seq);
}

class Cluster {
 public:
  Cluster(const Options& o, int max_overtakes)
      : o_(o), rng_(o.seed), background_max_ranks_(o.slots) {
    SchedulerOptions so;
    so.max_overtakes = max_overtakes;
    auto s = GangScheduler::Create(so);
    Require(s.ok(), s.status().ToString());
    s_ = std::move(s).value();
    for (int w = 0; w < o.workers; ++w) {
      Require(s_->AddWorker(absl::StrCat("w", w), o.slots).ok(), "AddWorker");
    }
  }
  GangScheduler& scheduler() { return *s_; }
  uint64_t NextSeq() { return seq_++; }

  // Fills to o.busy with small high-priority jobs placed by the scheduler (best fit packs them),
  // then releases a third at random.
  void Fragment() {
    const int64_t target = static_cast<int64_t>(o_.busy * static_cast<double>(s_->ready_slots()));
    while (s_->ready_slots() - s_->free_slots() < target) AddBackground();
    std::shuffle(background_.begin(), background_.end(), rng_);
    const size_t release = background_.size() / 3;
    for (size_t i = 0; i < release; ++i) ReleaseBackground();
  }
  // Adversarial: fills every slot with 1-rank jobs, then releases a random (1 - o.busy) of them,
  // so free slots are scattered over all workers and almost none is wholly free.
  void Scatter() {
    background_max_ranks_ = 1;
    while (s_->free_slots() > 0) AddBackground();
    std::shuffle(background_.begin(), background_.end(), rng_);
    const auto release =
        static_cast<size_t>((1.0 - o_.busy) * static_cast<double>(background_.size()));
    for (size_t i = 0; i < release; ++i) ReleaseBackground();
  }
  // Replaces one random background job by a new one: the cluster changes between repetitions.
  void Perturb() {
    std::uniform_int_distribution<size_t> pick(0, background_.size() - 1);
    std::swap(background_[pick(rng_)], background_.back());
    ReleaseBackground();
    AddBackground();
  }

 private:
  void AddBackground() {
    const std::string id = absl::StrCat("bg", bg_next_++);
    Require(
        s_->Enqueue(SmallJob(rng_, background_max_ranks_, id, /*priority=*/100, NextSeq())).ok(),
        "bg");
    const std::vector<Placement> placed = s_->Schedule();
    Require(placed.size() == 1 && placed[0].job_id == id, "background job not placed");
    background_.push_back(id);
  }
  void ReleaseBackground() {
    Require(s_->Release(background_.back()).ok(), "release background");
    background_.pop_back();
  }

  const Options& o_;
  std::mt19937_64 rng_;
  std::unique_ptr<GangScheduler> s_;
  std::vector<std::string> background_;
  uint64_t seq_ = 0;
  int bg_next_ = 0;
  int background_max_ranks_;  // Background jobs have 1..this many ranks.
};

// Counts workers used and stages whose data-parallel group spans more than one worker.
void Quality(const Placement& p, int* workers, int* split_stages) {
  std::set<std::string> all;
  *split_stages = 0;
  for (int64_t s = 0; s < p.pipeline_stages; ++s) {
    std::set<std::string> stage;
    for (int64_t r = 0; r < p.data_parallel; ++r) {
      stage.insert(p.ranks[s * p.data_parallel + r].worker_id);
    }
    if (stage.size() > 1) ++*split_stages;
    all.insert(stage.begin(), stage.end());
  }
  *workers = static_cast<int>(all.size());
}

// Blocked backlog: jobs needing more slots than are ever free here, but no more than the cluster.
void AddBacklog(Cluster& c, const Options& o, int priority, std::mt19937_64& rng) {
  const int64_t total = c.scheduler().ready_slots();
  const int64_t lo = (c.scheduler().free_slots() + o.slots * 64) / o.slots + 1;
  const int64_t hi = total / o.slots;
  Require(lo <= hi, "cluster too small for a blocked backlog; lower --busy");
  std::uniform_int_distribution<int64_t> stages(lo, hi);
  for (int i = 0; i < o.queued; ++i) {
    Require(
        c.scheduler()
            .Enqueue(Gang(absl::StrCat("backlog", i), stages(rng), o.slots, priority, c.NextSeq()))
            .ok(),
        "backlog");
  }
}

nlohmann::json PlaceGang(const Options& o, bool backfill, bool scattered) {
  Cluster c(o, backfill ? 1 << 30 : 0);
  std::mt19937_64 rng(o.seed + 7);
  if (scattered) {
    c.Scatter();
  } else {
    c.Fragment();
  }
  // Strict: the gang (priority 10) is first in line, the backlog (priority 0) waits behind it.
  // Backfill: the backlog (priority 20) is ahead, blocked; the gang overtakes it.
  AddBacklog(c, o, backfill ? 20 : 0, rng);
  GangScheduler& s = c.scheduler();
  std::vector<double> place_us, pending_us;
  std::vector<double> workers_used, split;
  for (int rep = 0; rep < o.reps; ++rep) {
    c.Perturb();
    Require(s.free_slots() >= o.stages * o.replicas, "gang does not fit; lower --busy");
    const auto t0 = Clock::now();
    Require(s.Enqueue(Gang("gang", o.stages, o.replicas, 10, c.NextSeq())).ok(), "gang");
    const std::vector<Placement> placed = s.Schedule();
    const auto t1 = Clock::now();
    Require(placed.size() == 1 && placed[0].job_id == "gang", "gang not placed alone");
    place_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    int w, sp;
    Quality(placed[0], &w, &sp);
    workers_used.push_back(w);
    split.push_back(sp);
    if (backfill && rep % 10 == 0) {
      const auto p0 = Clock::now();
      const size_t n = s.Pending().size();
      const auto p1 = Clock::now();
      Require(n == static_cast<size_t>(o.queued), "pending count");
      pending_us.push_back(std::chrono::duration<double, std::micro>(p1 - p0).count());
    }
    Require(s.Release("gang").ok(), "release gang");
  }
  nlohmann::json out = Summary(place_us);
  out["queued_jobs"] = s.queued_jobs();
  out["busy_slots_before"] = s.ready_slots() - s.free_slots();
  out["gang_workers_used_p50"] = Percentile(workers_used, 0.5);
  out["gang_split_stage_groups_p50"] = Percentile(split, 0.5);
  if (backfill) out["pending_reasons"] = Summary(pending_us);
  return out;
}

nlohmann::json StreamSmallJobs(const Options& o) {
  Cluster c(o, 0);
  GangScheduler& s = c.scheduler();
  std::mt19937_64 rng(o.seed + 11);
  std::vector<std::string> running;
  int next = 0;
  auto submit = [&] {
    Require(s.Enqueue(SmallJob(rng, 4, absl::StrCat("s", next++), 0, c.NextSeq())).ok(), "s");
  };
  auto schedule = [&] {
    int64_t n = 0;
    for (Placement& p : s.Schedule()) {
      running.push_back(std::move(p.job_id));
      ++n;
    }
    return n;
  };
  // Fill the cluster, then keep `queued` jobs waiting.
  while (s.free_slots() > 0) {
    submit();
    schedule();
  }
  for (int i = 0; i < o.queued; ++i) submit();
  schedule();
  int64_t decisions = 0;
  const auto t0 = Clock::now();
  for (int e = 0; e < o.stream_events; ++e) {
    std::uniform_int_distribution<size_t> pick(0, running.size() - 1);
    std::swap(running[pick(rng)], running.back());
    Require(s.Release(running.back()).ok(), "release");
    running.pop_back();
    submit();
    decisions += schedule();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return {{"events", o.stream_events},
          {"placements", decisions},
          {"seconds", seconds},
          {"decisions_per_s", static_cast<double>(decisions) / seconds},
          {"queued_jobs_end", s.queued_jobs()},
          {"running_jobs_end", s.placed_jobs()}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"DeepNet gang scheduler benchmark (docs/PERFORMANCE.md)"};
  app.add_option("--workers", o.workers);
  app.add_option("--slots", o.slots, "slots per worker");
  app.add_option("--queued", o.queued, "jobs queued besides the measured one");
  app.add_option("--reps", o.reps, "gang placements timed");
  app.add_option("--stages", o.stages, "pipeline stages of the timed gang");
  app.add_option("--replicas", o.replicas, "data-parallel replicas of the timed gang");
  app.add_option("--busy", o.busy, "fraction of slots filled before a third are released");
  app.add_option("--stream-events", o.stream_events);
  app.add_option("--seed", o.seed);
  CLI11_PARSE(app, argc, argv);

  nlohmann::json out;
  out["cluster"] = {{"workers", o.workers},
                    {"slots_per_worker", o.slots},
                    {"slots", o.workers * o.slots},
                    {"queued_jobs", o.queued},
                    {"gang", {{"pipeline_stages", o.stages}, {"data_parallel", o.replicas}}}};
  out["place_gang_strict"] = PlaceGang(o, /*backfill=*/false, /*scattered=*/false);
  out["place_gang_backfill"] = PlaceGang(o, /*backfill=*/true, /*scattered=*/false);
  out["place_gang_scattered"] = PlaceGang(o, /*backfill=*/false, /*scattered=*/true);
  out["stream_small_jobs"] = StreamSmallJobs(o);
  std::cout << out.dump(2) << std::endl;
  return 0;
}
