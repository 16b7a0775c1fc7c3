#include "pipeline/step_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace deepnet::pipeline {
namespace {

bool NonNegative(double x) { return std::isfinite(x) && x >= 0.0; }

// A channel is (sender, receiver, carries activations); its k-th send meets its k-th receive.
using Channel = std::tuple<int, int, bool>;

struct Posted {
  Channel channel;
  bool send = false;
  int sequence = 0;
};

}  // namespace

double LinkModel::Seconds(double bytes) const {
  return latency_s + (bytes_per_s > 0.0 ? bytes / bytes_per_s : 0.0);
}

absl::StatusOr<StepSimulation> SimulateStep(const StepSimulationInput& in) {
  const PipelineSchedule& schedule = in.schedule;
  const int p = static_cast<int>(schedule.size());
  if (p < 1) return absl::InvalidArgumentError("step simulation: the schedule has no stages");
  if (static_cast<int>(in.costs.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("step simulation: ", in.costs.size(),
                                                   " stage costs for ", p, " stages"));
  }
  if (p > 1 && static_cast<int>(in.boundary_bytes.size()) < p - 1) {
    return absl::InvalidArgumentError(absl::StrCat("step simulation: ", in.boundary_bytes.size(),
                                                   " boundary sizes for ", p, " stages"));
  }
  if (!in.reduction_s.empty() && static_cast<int>(in.reduction_s.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("step simulation: ", in.reduction_s.size(),
                                                   " reduction times for ", p, " stages"));
  }
  for (int s = 0; s < p; ++s) {
    const bool bad_reduction = !in.reduction_s.empty() && !NonNegative(in.reduction_s[s]);
    const bool bad_bytes = s < p - 1 && !NonNegative(in.boundary_bytes[s]);
    if (!NonNegative(in.costs[s].forward) || !NonNegative(in.costs[s].backward) ||
        bad_reduction || bad_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("step simulation: stage ", s, ": times and sizes must be finite and >= 0"));
    }
  }
  if (!NonNegative(in.link.latency_s) || !NonNegative(in.link.bytes_per_s)) {
    return absl::InvalidArgumentError("step simulation: link latency and bandwidth must be >= 0");
  }

  std::vector<size_t> position(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<int> live(p, 0);
  StepSimulation out;
  out.compute_s.assign(p, 0.0);
  out.peak_live_micro_batches.assign(p, 0);
  std::vector<std::vector<Posted>> group(p);  // The group a stage has posted and waits on.
  std::map<Channel, int> sends_posted, receives_posted;
  std::map<std::pair<Channel, int>, double> send_time, receive_time;  // Post times.
  const auto bytes_between = [&](int a, int b) { return in.boundary_bytes[std::min(a, b)]; };

  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (position[s] < schedule[s].size()) {
        const PipelineAction& a = schedule[s][position[s]];
        if (!IsTransfer(a.type)) {
          const bool forward = a.type == ActionType::kForward;
          const double cost = forward ? in.costs[s].forward : in.costs[s].backward;
          clock[s] += cost;
          out.compute_s[s] += cost;
          live[s] += forward ? 1 : -1;
          out.peak_live_micro_batches[s] = std::max(out.peak_live_micro_batches[s], live[s]);
          ++position[s];
          progress = true;
          continue;
        }
        const size_t end = GroupEnd(schedule[s], position[s]);
        if (group[s].empty()) {  // Post the whole group at the stage's current time.
          for (size_t i = position[s]; i < end; ++i) {
            const PipelineAction& t = schedule[s][i];
            const bool send = IsSend(t.type);
            const Channel c = send ? Channel{s, t.peer, CarriesActivation(t.type)}
                                   : Channel{t.peer, s, CarriesActivation(t.type)};
            const int k = (send ? sends_posted : receives_posted)[c]++;
            (send ? send_time : receive_time)[{c, k}] = clock[s];
            group[s].push_back(Posted{c, send, k});
          }
          progress = true;
        }
        double done = clock[s];
        bool matched = true;
        for (const Posted& t : group[s]) {
          const auto& other = t.send ? receive_time : send_time;
          const auto it = other.find({t.channel, t.sequence});
          if (it == other.end()) {
            matched = false;
            break;
          }
          const double start = std::max(it->second, (t.send ? send_time : receive_time)
                                                        .at({t.channel, t.sequence}));
          const double bytes = bytes_between(std::get<0>(t.channel), std::get<1>(t.channel));
          done = std::max(done, start + in.link.Seconds(bytes));
        }
        if (!matched) break;  // Blocked until the peers post their ends.
        clock[s] = done;
        group[s].clear();
        position[s] = end;
        progress = true;
      }
    }
  }
  std::vector<std::string> blocked;
  for (int s = 0; s < p; ++s) {
    if (position[s] < schedule[s].size()) {
      blocked.push_back(absl::StrCat("stage ", s, " at position ", position[s]));
    }
  }
  if (!blocked.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step simulation: the schedule deadlocks: ", absl::StrJoin(blocked, "; ")));
  }
  out.finish_s = clock;
  for (int s = 0; s < p; ++s) {
    const double reduction = in.reduction_s.empty() ? 0.0 : in.reduction_s[s];
    out.step_s = std::max(out.step_s, clock[s] + reduction);
  }
  for (int s = 0; s < p; ++s) {
    out.bubble.push_back(out.step_s > 0.0 ? 1.0 - out.compute_s[s] / out.step_s : 0.0);
  }
  return out;
}

}  // namespace deepnet::pipeline
