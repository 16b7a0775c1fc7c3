#include "ctl/progress.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl/format.h"

namespace deepnet::ctl {
namespace {

constexpr int kMaxBarWidth = 30;
constexpr int kMinBarWidth = 10;

std::string StateField(const ProgressView& view) {
  std::string text = StateName(view.state);
  if (view.state == v1::JOB_STATE_RECOVERING && view.recovery_cause != 0) {
    absl::StrAppend(&text, " (", CauseName(view.recovery_cause), ")");
  }
  return text;
}

int TotalWidth(const std::vector<std::string>& fields) {
  int total = 0;
  for (const auto& f : fields) total += static_cast<int>(f.size());
  return total + 2 * std::max<int>(0, static_cast<int>(fields.size()) - 1);
}

}  // namespace

void ApplyJob(const v1::Job& job, ProgressView* view) {
  view->state = job.state();
  view->recovery_cause = job.recovery_cause();
  view->attempt = job.attempt();
  view->step = std::max(view->step, job.step());
  view->max_steps = job.spec().max_steps();
}

void ApplyEvent(const v1::JobEvent& event, ProgressView* view) {
  if (event.type() == v1::JOB_EVENT_TYPE_STATE_CHANGED) {
    view->state = event.to_state();
    if (event.to_state() == v1::JOB_STATE_RECOVERING) view->recovery_cause = event.recovery_cause();
  }
  view->attempt = std::max(view->attempt, event.attempt());
}

void ApplyPoint(const v1::MetricPoint& point, ProgressView* view) {
  view->has_metrics = true;
  // A restarted attempt may report steps again from its checkpoint: show what it reports.
  view->step = point.step();
  view->loss = point.loss();
  view->tokens_per_s = point.tokens_per_s();
  view->lr = point.lr();
  view->attempt = std::max(view->attempt, point.attempt());
}

std::string RenderProgressLine(const ProgressView& view, int width, bool with_bar) {
  // Fields in display order with their importance (lower is dropped first).
  struct Field {
    std::string text;
    int importance;
  };
  std::vector<Field> fields;
  fields.push_back({view.max_steps > 0 ? absl::StrCat("step ", view.step, "/", view.max_steps)
                                       : absl::StrCat("step ", view.step),
                    5});
  if (view.has_metrics) {
    fields.push_back({absl::StrFormat("loss %.4f", view.loss), 4});
    fields.push_back({absl::StrCat(FormatCount(view.tokens_per_s), " tok/s"), 2});
    fields.push_back({absl::StrFormat("lr %.2e", view.lr), 1});
  }
  fields.push_back({StateField(view), 6});
  if (view.attempt > 0) fields.push_back({absl::StrCat("attempt ", view.attempt), 3});

  auto texts = [&fields] {
    std::vector<std::string> out;
    for (const auto& f : fields) out.push_back(f.text);
    return out;
  };
  auto drop_least_important = [&fields] {
    fields.erase(std::min_element(fields.begin(), fields.end(), [](const Field& a, const Field& b) {
      return a.importance < b.importance;
    }));
  };
  std::string prefix;
  if (with_bar && view.max_steps > 0) {
    const double fraction =
        std::clamp(static_cast<double>(view.step) / static_cast<double>(view.max_steps), 0.0, 1.0);
    const std::string percent = absl::StrFormat("%3d%%", static_cast<int>(fraction * 100));
    // "[" bar "] " percent "  " fields: a short bar is worth more than lr, tokens/s, attempt
    // and loss, not more than step and state.
    const int overhead = static_cast<int>(percent.size()) + 5;
    auto room = [&] { return width - TotalWidth(texts()) - overhead; };
    while (room() < kMinBarWidth && fields.size() > 2) drop_least_important();
    const int bar_width = std::min(kMaxBarWidth, room());
    if (bar_width >= kMinBarWidth) {
      const int filled = static_cast<int>(std::lround(fraction * bar_width));
      prefix = absl::StrCat("[", std::string(filled, '#'), std::string(bar_width - filled, '-'),
                            "] ", percent, "  ");
    } else {
      prefix = absl::StrCat(percent, "  ");
    }
  }
  // Drop the least important fields until the line fits.
  while (static_cast<int>(prefix.size()) + TotalWidth(texts()) > width && fields.size() > 1) {
    drop_least_important();
  }
  std::string line = prefix + absl::StrJoin(texts(), "  ");
  if (width > 0 && static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

std::string DescribeEvent(const v1::JobEvent& event) {
  std::string text;
  switch (event.type()) {
    case v1::JOB_EVENT_TYPE_STATE_CHANGED:
      text = absl::StrCat("state ", StateName(event.from_state()), " -> ",
                          StateName(event.to_state()));
      if (event.recovery_cause() != 0) {
        absl::StrAppend(&text, " (", CauseName(event.recovery_cause()), ")");
      }
      break;
    case v1::JOB_EVENT_TYPE_PLACED:
      text = absl::StrCat("attempt ", event.attempt(), " placed");
      if (!event.worker_id().empty()) absl::StrAppend(&text, " on ", event.worker_id());
      break;
    case v1::JOB_EVENT_TYPE_RANK_EXITED:
      text = event.signal() != 0
                 ? absl::StrCat("rank ", event.rank(), " killed by signal ", event.signal())
                 : absl::StrCat("rank ", event.rank(), " exited with code ", event.exit_code());
      if (!event.worker_id().empty()) absl::StrAppend(&text, " on worker ", event.worker_id());
      break;
    case v1::JOB_EVENT_TYPE_WORKER_LOST:
      text = absl::StrCat("worker ", event.worker_id(), " lost");
      break;
    case v1::JOB_EVENT_TYPE_CHECKPOINT_SAVED:
      text = absl::StrCat("checkpoint saved at step ", event.checkpoint_step());
      break;
    case v1::JOB_EVENT_TYPE_HANG_DETECTED:
      text = "no progress within the hang timeout";
      break;
    case v1::JOB_EVENT_TYPE_CANCEL_REQUESTED:
      text = "cancellation requested";
      break;
    case v1::JOB_EVENT_TYPE_GUARD_ROLLBACK:
      text = absl::StrCat("guard rolled back to step ", event.guard_to_step(), " (",
                          event.guard_trigger(), ", retry ", event.guard_retries(), ")");
      break;
    case v1::JOB_EVENT_TYPE_GUARD_FAILED:
      text = "guard gave up";
      break;
    case v1::JOB_EVENT_TYPE_PLATEAU:
      text = "validation loss plateau";
      break;
    case v1::JOB_EVENT_TYPE_FAIL_REQUESTED:
      text = absl::StrCat("failing: ", event.message());
      break;
    default:
      text = absl::StrCat("event ", v1::JobEventType_Name(event.type()));
      break;
  }
  if (!event.message().empty()) absl::StrAppend(&text, ": ", event.message());
  if (IsSet(event.time())) text = absl::StrCat(FormatTimestamp(event.time()), "  ", text);
  return text;
}

std::string DescribeSnapshot(const v1::Job& job) {
  std::string text = absl::StrCat("job ", job.job_id());
  if (!job.spec().name().empty()) absl::StrAppend(&text, " (", job.spec().name(), ")");
  absl::StrAppend(&text, " ", StateName(job.state()));
  if (job.state() == v1::JOB_STATE_RECOVERING && job.recovery_cause() != 0) {
    absl::StrAppend(&text, " (", CauseName(job.recovery_cause()), ")");
  }
  if (job.pending_code() != v1::PENDING_CODE_UNSPECIFIED) {
    absl::StrAppend(&text, " (", PendingCodeName(job.pending_code()), ")");
  }
  absl::StrAppend(&text, ", step ", job.step());
  if (job.spec().max_steps() > 0) absl::StrAppend(&text, "/", job.spec().max_steps());
  if (job.attempt() > 0) absl::StrAppend(&text, ", attempt ", job.attempt());
  if (!job.pending_reason().empty())
    absl::StrAppend(&text, ": ", job.pending_reason());
  else if (!job.message().empty())
    absl::StrAppend(&text, ": ", job.message());
  return text;
}

}  // namespace deepnet::ctl
