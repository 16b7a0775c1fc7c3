#include "ctl/job_watcher.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "rpc/rpc_util.h"

namespace deepnet::ctl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kClearLine = "\r\033[K";

}  // namespace

JobWatcher::JobWatcher(JobClient* client, const WatchOptions& options, std::ostream& out,
                       std::ostream& err, std::ostream* terminal)
    : client_(client),
      options_(options),
      out_(out),
      err_(err),
      terminal_(terminal != nullptr ? *terminal : out) {}

int JobWatcher::Run(const std::string& job_id) {
  std::thread metrics([this, job_id] { MetricsLoop(job_id); });
  auto stop_metrics = [&](std::chrono::milliseconds grace) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, grace, [this] { return metrics_done_; });
    stop_ = true;
    if (metrics_context_ != nullptr) metrics_context_->TryCancel();
    cv_.notify_all();
    lock.unlock();
    metrics.join();
  };

  int64_t next_sequence = 0;  // 0: the snapshot, then new events only.
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  bool in_outage = false;          // Failed since the last message received...
  Clock::time_point outage_since;  // ...first at this time.
  while (true) {
    grpc::ClientContext context;
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_from_sequence(next_sequence);
    auto reader = client_->Watch(&context, request);
    v1::WatchJobResponse response;
    while (!IsTerminal(state) && reader->Read(&response)) {
      in_outage = false;
      if (response.has_snapshot()) state = response.snapshot().state();
      if (response.has_event()) {
        next_sequence = response.event().sequence() + 1;
        if (response.event().type() == v1::JOB_EVENT_TYPE_STATE_CHANGED) {
          state = response.event().to_state();
        }
      }
      OnWatchResponse(response);
    }
    // The job is terminal (the server ends the stream then; don't depend on it) or the stream
    // ended early.
    if (IsTerminal(state)) context.TryCancel();
    const grpc::Status status = reader->Finish();
    if (IsTerminal(state)) break;
    const bool retryable = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!retryable) {
      stop_metrics(std::chrono::milliseconds(0));
      Note(absl::StrCat("deepnetctl: ", rpc::Describe(status)));
      return ExitCodeFor(status.error_code());
    }
    const Clock::time_point now = Clock::now();
    if (!in_outage) {
      in_outage = true;
      outage_since = now;
      Note(absl::StrCat("deepnetctl: watch of job ", job_id, " interrupted (",
                        status.ok() ? "stream ended early" : rpc::Describe(status),
                        "); reconnecting"));
    }
    if (now - outage_since >= options_.reconnect_window) {
      stop_metrics(std::chrono::milliseconds(0));
      const grpc::Status lost(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat(
              "lost the coordinator while watching job ", job_id, " (no answer for ",
              std::chrono::duration_cast<std::chrono::milliseconds>(options_.reconnect_window)
                  .count(),
              " ms): ", status.ok() ? "stream ended" : status.error_message()));
      Note(absl::StrCat("deepnetctl: ", rpc::Describe(lost)));
      return kExitUnreachable;
    }
    std::this_thread::sleep_for(options_.reconnect_backoff);
  }
  stop_metrics(options_.metrics_grace);
  FinishOutput(job_id);
  return state == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitJobFailed;
}

void JobWatcher::MetricsLoop(const std::string& job_id) {
  while (true) {
    grpc::ClientContext context;
    v1::StreamMetricsRequest request;
    request.set_job_id(job_id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      metrics_context_ = &context;
      // First connection: live points only (the progress line wants the latest); after a
      // reconnection: everything after the last point seen.
      if (last_step_ < 0) {
        request.set_live_only(true);
      } else {
        request.set_from_step(last_step_ + 1);
      }
    }
    auto reader = client_->StreamMetrics(&context, request);
    v1::StreamMetricsResponse response;
    while (reader->Read(&response)) OnMetrics(response);
    const grpc::Status status = reader->Finish();
    std::unique_lock<std::mutex> lock(mu_);
    metrics_context_ = nullptr;
    if (stop_ || status.ok()) break;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      lock.unlock();
      Note(absl::StrCat("deepnetctl: metrics of job ", job_id, ": ", rpc::Describe(status)));
      lock.lock();
      break;
    }
    cv_.wait_for(lock, options_.reconnect_backoff, [this] { return stop_; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  metrics_done_ = true;
  cv_.notify_all();
}

void JobWatcher::OnWatchResponse(const v1::WatchJobResponse& response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.format != OutputFormat::kTable) {
    PrintDocument(response);
    return;
  }
  if (response.has_snapshot()) {
    ApplyJob(response.snapshot(), &view_);
    PrintLine(DescribeSnapshot(response.snapshot()));
  } else if (response.has_event()) {
    ApplyEvent(response.event(), &view_);
    PrintLine(DescribeEvent(response.event()));
  }
  Redraw();
}

void JobWatcher::OnMetrics(const v1::StreamMetricsResponse& response) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::MetricPoint& point : response.points()) last_step_ = point.step();
  if (options_.format != OutputFormat::kTable) {
    PrintDocument(response);
    return;
  }
  for (const v1::MetricPoint& point : response.points()) {
    ApplyPoint(point, &view_);
    if (!options_.tty) PrintLine(RenderProgressLine(view_, 1 << 20, /*with_bar=*/false));
  }
  Redraw();
}

void JobWatcher::Note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (drawn_) ClearLine();
  err_ << line << std::endl;
  if (drawn_) {
    drawn_ = false;
    Redraw();
  }
}

void JobWatcher::FinishOutput(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.format != OutputFormat::kTable) return;
  if (drawn_) out_ << '\n';
  drawn_ = false;
  out_ << "job " << job_id << " ended " << StateName(view_.state) << std::endl;
}

void JobWatcher::ClearLine() {
  out_ << std::flush;  // What came before reaches the terminal first.
  terminal_ << kClearLine << std::flush;
}

void JobWatcher::PrintLine(const std::string& line) {
  if (drawn_) ClearLine();
  drawn_ = false;
  out_ << line << '\n';
}

void JobWatcher::Redraw() {
  if (!options_.tty || options_.format != OutputFormat::kTable) {
    out_ << std::flush;
    return;
  }
  ClearLine();
  out_ << RenderProgressLine(view_, options_.width - 1) << std::flush;
  drawn_ = true;
}

void JobWatcher::PrintDocument(const google::protobuf::Message& message) {
  if (options_.format == OutputFormat::kJson) {
    out_ << ToJson(message, /*pretty=*/false) << '\n';
  } else {
    out_ << "---\n" << JsonToYaml(ToJson(message, /*pretty=*/false));
  }
  out_ << std::flush;
}

}  // namespace deepnet::ctl
