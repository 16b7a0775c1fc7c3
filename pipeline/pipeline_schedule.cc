#include "pipeline/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace deepnet::pipeline {

bool IsSend(ActionType t) {
  return t == ActionType::kSendActivation || t == ActionType::kSendGradient;
}
bool IsRecv(ActionType t) {
  return t == ActionType::kRecvActivation || t == ActionType::kRecvGradient;
}
bool IsTransfer(ActionType t) { return IsSend(t) || IsRecv(t); }
bool CarriesActivation(ActionType t) {
  return t == ActionType::kSendActivation || t == ActionType::kRecvActivation;
}

size_t GroupEnd(const std::vector<PipelineAction>& actions, size_t position) {
  size_t end = position + 1;
  const int id = actions[position].group;
  while (id >= 0 && end < actions.size() && actions[end].group == id) ++end;
  return end;
}

namespace {

// The neighbour an action talks to on stage `s`: activations flow s -> s + 1, gradients back.
int ExpectedPeer(ActionType t, int s) {
  switch (t) {
    case ActionType::kSendActivation:
    case ActionType::kRecvGradient:
      return s + 1;
    case ActionType::kRecvActivation:
    case ActionType::kSendGradient:
      return s - 1;
    default:
      return -1;
  }
}

std::string Describe(const PipelineAction& a) {
  std::string text = absl::StrCat(ToString(a.type), " of micro-batch ", a.micro_batch);
  if (IsSend(a.type)) absl::StrAppend(&text, " to stage ", a.peer);
  if (IsRecv(a.type)) absl::StrAppend(&text, " from stage ", a.peer);
  return text;
}

void AppendStep(std::vector<PipelineAction>& list, ActionType type, int mb, int peer = -1) {
  list.push_back(PipelineAction{type, mb, peer, -1});
}

// Forward of `mb` on stage s of P with its receive and send.
void AppendForward(std::vector<PipelineAction>& list, int s, int p, int mb) {
  if (s > 0) AppendStep(list, ActionType::kRecvActivation, mb, s - 1);
  AppendStep(list, ActionType::kForward, mb);
  if (s < p - 1) AppendStep(list, ActionType::kSendActivation, mb, s + 1);
}

// Backward of `mb`; the last stage starts it from its own loss, so it receives nothing.
void AppendBackward(std::vector<PipelineAction>& list, int s, int p, int mb) {
  if (s < p - 1) AppendStep(list, ActionType::kRecvGradient, mb, s + 1);
  AppendStep(list, ActionType::kBackward, mb);
  if (s > 0) AppendStep(list, ActionType::kSendGradient, mb, s - 1);
}

// Per-micro-batch progress of one stage during a replay.
struct StageState {
  size_t position = 0;
  double clock = 0.0;
  double busy = 0.0;
  int live = 0;
  int peak_live = 0;
  std::vector<uint8_t> received_activation, forwarded, sent_activation;
  std::vector<uint8_t> received_gradient, backwarded, sent_gradient;
  explicit StageState(int m)
      : received_activation(m),
        forwarded(m),
        sent_activation(m),
        received_gradient(m),
        backwarded(m),
        sent_gradient(m) {}
};

struct Message {
  int micro_batch = 0;
  double time = 0.0;  // When the sender finished producing it.
};

// (sender, receiver, carries activation) -> messages in flight, oldest first.
using Channels = std::map<std::tuple<int, int, bool>, std::deque<Message>>;

// Checks the action at `st.position` against the stage's history, independent of timing.
absl::Status CheckAction(const PipelineAction& a, int s, int p, int m, const StageState& st) {
  const std::string where = absl::StrCat("stage ", s, " position ", st.position, ": ");
  if (a.micro_batch < 0 || a.micro_batch >= m) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, Describe(a), ": micro-batch outside [0, ", m, ")"));
  }
  const int expected_peer = ExpectedPeer(a.type, s);
  if (IsSend(a.type) || IsRecv(a.type)) {
    if (expected_peer < 0 || expected_peer >= p) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, Describe(a), " but stage ", s, " is the ",
                       expected_peer < 0 ? "first" : "last", " stage"));
    }
    if (a.peer != expected_peer) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, Describe(a), ": the peer must be the neighbour stage ", expected_peer));
    }
  } else if (a.peer != -1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, Describe(a), " has peer ", a.peer, "; compute takes peer -1"));
  }
  const int i = a.micro_batch;
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, Describe(a), " ", why));
  };
  switch (a.type) {
    case ActionType::kRecvActivation:
      if (st.received_activation[i]) return fail("is its second");
      if (st.forwarded[i]) return fail("comes after its Forward");
      break;
    case ActionType::kForward:
      if (st.forwarded[i]) return fail("is its second");
      if (s > 0 && !st.received_activation[i]) return fail("comes before its RecvActivation");
      break;
    case ActionType::kSendActivation:
      if (st.sent_activation[i]) return fail("is its second");
      if (!st.forwarded[i]) return fail("comes before the Forward that produces it");
      break;
    case ActionType::kRecvGradient:
      if (st.received_gradient[i]) return fail("is its second");
      if (!st.forwarded[i]) return fail("comes before its Forward");
      if (st.backwarded[i]) return fail("comes after its Backward");
      break;
    case ActionType::kBackward:
      if (st.backwarded[i]) return fail("is its second");
      if (!st.forwarded[i]) return fail("comes before its Forward");
      if (s < p - 1 && !st.received_gradient[i]) return fail("comes before its RecvGradient");
      break;
    case ActionType::kSendGradient:
      if (st.sent_gradient[i]) return fail("is its second");
      if (!st.backwarded[i]) return fail("comes before the Backward that produces it");
      break;
  }
  return absl::OkStatus();
}

// After every stage has run its list: each micro-batch went through every step exactly once.
absl::Status CheckComplete(const std::vector<StageState>& states, const Channels& channels, int m) {
  const int p = static_cast<int>(states.size());
  for (int s = 0; s < p; ++s) {
    const StageState& st = states[s];
    for (int i = 0; i < m; ++i) {
      const char* missing = nullptr;
      if (s > 0 && !st.received_activation[i])
        missing = "RecvActivation";
      else if (!st.forwarded[i])
        missing = "Forward";
      else if (s < p - 1 && !st.sent_activation[i])
        missing = "SendActivation";
      else if (s < p - 1 && !st.received_gradient[i])
        missing = "RecvGradient";
      else if (!st.backwarded[i])
        missing = "Backward";
      else if (s > 0 && !st.sent_gradient[i])
        missing = "SendGradient";
      if (missing != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", s, ": micro-batch ", i, " has no ", missing));
      }
    }
  }
  for (const auto& [key, queue] : channels) {
    if (queue.empty()) continue;
    const auto& [from, to, activation] = key;
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", from, " sends the ", activation ? "activation" : "gradient", " of micro-batch ",
        queue.front().micro_batch, " to stage ", to, ", which never receives it"));
  }
  return absl::OkStatus();
}

// Runs every stage's list with non-blocking sends and blocking FIFO receives, checking each
// action; with `costs`, also times each action (transfers take no time).
absl::StatusOr<TimelineResult> Replay(const PipelineSchedule& schedule, int m,
                                      const std::vector<StageCost>& costs) {
  const int p = static_cast<int>(schedule.size());
  if (p < 1) return absl::InvalidArgumentError("pipeline schedule has no stages");
  if (m < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches must be >= 1, got ", m));
  }
  std::vector<StageState> states(p, StageState(m));
  Channels channels;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      StageState& st = states[s];
      while (st.position < schedule[s].size()) {
        const PipelineAction& a = schedule[s][st.position];
        if (absl::Status status = CheckAction(a, s, p, m, st); !status.ok()) return status;
        const int i = a.micro_batch;
        if (IsRecv(a.type)) {
          auto& queue = channels[{a.peer, s, CarriesActivation(a.type)}];
          if (queue.empty()) break;  // Blocked until the peer sends.
          if (queue.front().micro_batch != i) {
            return absl::InvalidArgumentError(absl::StrCat(
                "stage ", s, " position ", st.position, ": ", Describe(a), ", but the next ",
                CarriesActivation(a.type) ? "activation" : "gradient", " stage ", a.peer,
                " sends it is micro-batch ", queue.front().micro_batch));
          }
          st.clock = std::max(st.clock, queue.front().time);
          queue.pop_front();
          (a.type == ActionType::kRecvActivation ? st.received_activation
                                                 : st.received_gradient)[i] = 1;
        } else if (IsSend(a.type)) {
          channels[{s, a.peer, CarriesActivation(a.type)}].push_back(Message{i, st.clock});
          (a.type == ActionType::kSendActivation ? st.sent_activation : st.sent_gradient)[i] = 1;
        } else {
          const bool forward = a.type == ActionType::kForward;
          const double cost = forward ? costs[s].forward : costs[s].backward;
          st.clock += cost;
          st.busy += cost;
          (forward ? st.forwarded : st.backwarded)[i] = 1;
          st.live += forward ? 1 : -1;
          st.peak_live = std::max(st.peak_live, st.live);
        }
        ++st.position;
        progress = true;
      }
    }
  }
  std::vector<std::string> blocked;
  for (int s = 0; s < p; ++s) {
    if (states[s].position < schedule[s].size()) {
      blocked.push_back(absl::StrCat("stage ", s, " position ", states[s].position, " waits on ",
                                     Describe(schedule[s][states[s].position])));
    }
  }
  if (!blocked.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline schedule deadlocks: ", absl::StrJoin(blocked, "; ")));
  }
  if (absl::Status status = CheckComplete(states, channels, m); !status.ok()) return status;

  TimelineResult result;
  for (const StageState& st : states) result.makespan = std::max(result.makespan, st.clock);
  for (const StageState& st : states) {
    result.busy.push_back(st.busy);
    result.idle_fraction.push_back(result.makespan > 0.0 ? 1.0 - st.busy / result.makespan : 0.0);
    result.peak_live_micro_batches.push_back(st.peak_live);
  }
  return result;
}

// Group ids: compute takes -1; a group id >= 0 names one adjacent run of one stage's transfers.
absl::Status CheckGroups(const PipelineSchedule& schedule) {
  for (size_t s = 0; s < schedule.size(); ++s) {
    std::set<int> seen;
    for (size_t i = 0; i < schedule[s].size(); ++i) {
      const PipelineAction& a = schedule[s][i];
      const std::string where = absl::StrCat("stage ", s, " position ", i, ": ", Describe(a));
      if (!IsTransfer(a.type) && a.group != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " has group ", a.group, "; compute takes group -1"));
      }
      if (a.group < -1) {
        return absl::InvalidArgumentError(absl::StrCat(where, " has group ", a.group, " < -1"));
      }
      if (a.group < 0 || (i > 0 && schedule[s][i - 1].group == a.group)) continue;
      if (!seen.insert(a.group).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " is in group ", a.group, ", whose other transfers are not adjacent to it"));
      }
    }
  }
  return absl::OkStatus();
}

// Replays the schedule on a rendezvous transport: a stage reaching a group (a run of transfers
// with one id, or a lone transfer) posts all of them, and leaves the group once each is matched
// by a posted counterpart: the k-th send on a channel (sender, receiver, direction) by the k-th
// receive on it. Posting never blocks, completing does; compute never blocks.
absl::Status CheckRendezvous(const PipelineSchedule& schedule) {
  const int p = static_cast<int>(schedule.size());
  std::map<std::tuple<int, int, bool>, int> posted_sends, posted_receives;
  struct Posted {
    std::tuple<int, int, bool> channel;
    bool send = false;
    int sequence = 0;  // Index of this transfer on its channel.
  };
  std::vector<size_t> position(p, 0);
  std::vector<std::vector<Posted>> group(p);  // The group a stage has posted and waits on.
  auto group_end = [&](int s) { return GroupEnd(schedule[s], position[s]); };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (position[s] < schedule[s].size()) {
        const PipelineAction& a = schedule[s][position[s]];
        if (!IsTransfer(a.type)) {
          ++position[s];
          progress = true;
          continue;
        }
        const size_t end = group_end(s);
        if (group[s].empty()) {
          for (size_t i = position[s]; i < end; ++i) {
            const PipelineAction& t = schedule[s][i];
            const bool send = IsSend(t.type);
            const std::tuple<int, int, bool> channel{send ? s : t.peer, send ? t.peer : s,
                                                     CarriesActivation(t.type)};
            int& count = (send ? posted_sends : posted_receives)[channel];
            group[s].push_back(Posted{channel, send, count++});
          }
          progress = true;
        }
        const bool done = std::all_of(group[s].begin(), group[s].end(), [&](const Posted& t) {
          return (t.send ? posted_receives : posted_sends)[t.channel] > t.sequence;
        });
        if (!done) break;
        group[s].clear();
        position[s] = end;
        progress = true;
      }
    }
  }
  std::vector<std::string> blocked;
  for (int s = 0; s < p; ++s) {
    if (position[s] >= schedule[s].size()) continue;
    std::vector<std::string> waits;
    for (size_t i = position[s]; i < group_end(s); ++i) waits.push_back(Describe(schedule[s][i]));
    blocked.push_back(absl::StrCat("stage ", s, " position ", position[s], " waits on ",
                                   absl::StrJoin(waits, " + ")));
  }
  if (blocked.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline schedule deadlocks under rendezvous semantics (a send completes only when its "
      "receive is posted; post a send and the receive it waits for in one group): ",
      absl::StrJoin(blocked, "; ")));
}

}  // namespace

std::string ToString(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::k1F1B:
      return "1f1b";
  }
  return "unknown";
}

absl::StatusOr<ScheduleKind> ParseSchedule(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "gpipe") return ScheduleKind::kGPipe;
  if (lower == "1f1b") return ScheduleKind::k1F1B;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline schedule '", name, "'; expected gpipe or 1f1b"));
}

std::string ToString(ActionType type) {
  switch (type) {
    case ActionType::kForward:
      return "Forward";
    case ActionType::kBackward:
      return "Backward";
    case ActionType::kSendActivation:
      return "SendActivation";
    case ActionType::kRecvActivation:
      return "RecvActivation";
    case ActionType::kSendGradient:
      return "SendGradient";
    case ActionType::kRecvGradient:
      return "RecvGradient";
  }
  return "Unknown";
}

absl::StatusOr<PipelineSchedule> BuildSchedule(ScheduleKind kind, int stages, int micro_batches,
                                               bool group_transfers) {
  if (stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline stages must be >= 1, got ", stages));
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline micro_batches must be >= 1, got ", micro_batches));
  }
  const int p = stages, m = micro_batches;
  PipelineSchedule schedule(p);
  for (int s = 0; s < p; ++s) {
    std::vector<PipelineAction>& list = schedule[s];
    if (kind == ScheduleKind::kGPipe) {
      for (int i = 0; i < m; ++i) AppendForward(list, s, p, i);
      for (int i = m - 1; i >= 0; --i) AppendBackward(list, s, p, i);
      continue;
    }
    // 1F1B (PipeDream-flush, arXiv:2006.09503): enough warm-up forwards to fill the stages
    // after this one, then one forward and one backward in turn, then drain the backwards.
    const int warmup = std::min(p - s - 1, m);
    for (int i = 0; i < warmup; ++i) AppendForward(list, s, p, i);
    for (int k = 0; k < m - warmup; ++k) {
      AppendForward(list, s, p, warmup + k);
      AppendBackward(list, s, p, k);
    }
    for (int i = m - warmup; i < m; ++i) AppendBackward(list, s, p, i);
  }
  if (!group_transfers) return schedule;
  // One group per run of transfers between two computes: the send of what the last compute
  // produced and the receive the next compute needs are posted together.
  for (auto& list : schedule) {
    int next = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!IsTransfer(list[i].type)) continue;
      const bool continues = i > 0 && IsTransfer(list[i - 1].type);
      list[i].group = continues ? list[i - 1].group : next++;
    }
  }
  return schedule;
}

absl::Status CheckSchedule(const PipelineSchedule& schedule, int micro_batches) {
  if (absl::Status s = CheckGroups(schedule); !s.ok()) return s;
  // Buffered sends first: matching, order and completeness, with the clearest messages.
  absl::Status status =
      Replay(schedule, micro_batches, std::vector<StageCost>(schedule.size())).status();
  if (!status.ok()) return status;
  return CheckRendezvous(schedule);
}

double PredictedBubbleFraction(int stages, int micro_batches) {
  // Undefined without at least one stage and one micro-batch.
  if (stages < 1 || micro_batches < 1) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

absl::StatusOr<TimelineResult> SimulateSchedule(const PipelineSchedule& schedule,
                                                const std::vector<StageCost>& costs) {
  if (costs.size() != schedule.size()) {
    return absl::InvalidArgumentError(absl::StrCat("stage costs have ", costs.size(),
                                                   " entries for ", schedule.size(), " stages"));
  }
  for (size_t s = 0; s < costs.size(); ++s) {
    if (!std::isfinite(costs[s].forward) || !std::isfinite(costs[s].backward) ||
        costs[s].forward < 0.0 || costs[s].backward < 0.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, ": costs must be finite and >= 0, got forward ",
                       costs[s].forward, " backward ", costs[s].backward));
    }
  }
  // The schedule names micro-batches 0..m-1; Replay rejects any it skips.
  int m = 0;
  for (const auto& list : schedule) {
    for (const PipelineAction& a : list) m = std::max(m, a.micro_batch + 1);
  }
  return Replay(schedule, m, costs);
}

}  // namespace deepnet::pipeline
