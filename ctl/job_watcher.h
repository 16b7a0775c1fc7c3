#pragma once
// `deepnetctl watch`: follows one job until it is terminal. WatchJob (snapshot, then events)
// runs on the calling thread and StreamMetrics on a second one; both feed one printer. On a
// terminal the progress line is redrawn in place under the event lines; otherwise every event
// and metric point is one plain line (or one JSON line / YAML document with -o json|yaml).
// When the coordinator goes away both streams reconnect (resuming after the last event and
// step) for up to `reconnect_window`, then the watch fails with UNAVAILABLE.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>

#include "ctl/job_client.h"
#include "ctl/output.h"
#include "ctl/progress.h"

namespace deepnet::ctl {

struct WatchOptions {
  OutputFormat format = OutputFormat::kTable;
  // Standard output is a terminal: redraw the progress line in place.
  bool tty = false;
  // Terminal columns for the progress line.
  int width = 80;
  // How long to keep reconnecting once the coordinator stopped answering; 0: fail at once.
  std::chrono::milliseconds reconnect_window{30000};
  // Wait between reconnection attempts.
  std::chrono::milliseconds reconnect_backoff{500};
  // Once the job is terminal, how long the metric stream may take to deliver its last points.
  std::chrono::milliseconds metrics_grace{2000};
};

// One use per object (Run once). Run blocks; the object is not otherwise thread-safe.
class JobWatcher {
 public:
  // `terminal`: where the progress line's own CR and ESC [K go (unescaped, the same stream as
  // `out`); null: out.
  JobWatcher(JobClient* client, const WatchOptions& options, std::ostream& out, std::ostream& err,
             std::ostream* terminal = nullptr);
  JobWatcher(const JobWatcher&) = delete;
  JobWatcher& operator=(const JobWatcher&) = delete;

  // Watches `job_id` until it is terminal. Returns kExitOk for SUCCEEDED, kExitJobFailed for
  // FAILED or CANCELLED, or the exit code of the error that ended the watch (printed to err).
  int Run(const std::string& job_id);

 private:
  void MetricsLoop(const std::string& job_id);
  // Output; each takes mu_.
  void OnWatchResponse(const v1::WatchJobResponse& response);
  void OnMetrics(const v1::StreamMetricsResponse& response);
  void Note(const std::string& line);  // To err, keeping the progress line intact.
  void FinishOutput(const std::string& job_id);
  // With mu_ held.
  void PrintLine(const std::string& line);
  void ClearLine();  // kClearLine on terminal_, after flushing out_.
  void Redraw();
  void PrintDocument(const google::protobuf::Message& message);

  JobClient* const client_;
  const WatchOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::ostream& terminal_;

  std::mutex mu_;
  std::condition_variable cv_;
  ProgressView view_;                               // Guarded by mu_.
  bool drawn_ = false;                              // Guarded by mu_: a progress line is on screen.
  bool stop_ = false;                               // Guarded by mu_: the metrics thread must end.
  bool metrics_done_ = false;                       // Guarded by mu_.
  grpc::ClientContext* metrics_context_ = nullptr;  // Guarded by mu_.
  int64_t last_step_ = -1;  // Guarded by mu_: step of the latest metric point.
};

}  // namespace deepnet::ctl
