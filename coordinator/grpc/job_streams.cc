#include "coordinator/grpc/job_streams.h"

#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "coordinator/grpc/proto_convert.h"
#include "rpc/request_check.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {
namespace {

// Events one read takes from the coordinator (each is one message).
constexpr size_t kEventsPerRead = 64;
// Metric points per StreamMetrics message.
constexpr size_t kPointsPerMessage = 500;

class FinishedReactor : public RawWriteReactor {
 public:
  explicit FinishedReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// The machinery every stream shares: one write in flight at most, cancellation, and its own
// lifetime (it keeps itself alive until gRPC's OnDone; the hub and blocking reads hold it
// through shared and weak pointers, so none of them can touch a deleted stream).
class FeedStream : public RawWriteReactor,
                   public Wakeable,
                   public std::enable_shared_from_this<FeedStream> {
 public:
  FeedStream(StreamHub& hub, Principal who) : hub_(hub), who_(std::move(who)) {}

  // Hands the stream to gRPC; with a job id, it wakes when that job's feed changes.
  RawWriteReactor* Start(const std::string& job_id) {
    self_ = shared_from_this();
    if (!job_id.empty()) subscription_ = hub_.Subscribe(job_id, weak_from_this());
    Wake();
    return this;
  }

  void Wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    OnWakeLocked();
    PumpLocked();
  }

 protected:
  enum class Next {
    kWrite,   // *out holds the next message
    kWait,    // nothing to send now: a Wake() comes when there may be
    kFinish,  // end with *status
  };
  // With mu_ held, no write in flight and the stream not finished.
  virtual Next NextLocked(grpc::ByteBuffer* out, grpc::Status* status) = 0;
  virtual void OnWakeLocked() {}

  void PumpLocked() {
    if (finished_ || writing_) return;
    if (cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
      return;
    }
    // A stream outlives no token: once the caller's expires or is revoked (a reload of the
    // tokens file), it ends UNAUTHENTICATED at its next wake-up (every sweep at the latest).
    if (absl::Status valid = token_.Check(); !valid.ok()) {
      FinishLocked(rpc::ToGrpc(valid));
      return;
    }
    grpc::Status status;
    switch (NextLocked(&buffer_, &status)) {
      case Next::kWrite:
        writing_ = true;
        StartWrite(&buffer_);
        return;
      case Next::kWait:
        return;
      case Next::kFinish:
        FinishLocked(std::move(status));
        return;
    }
  }

  StreamHub& hub_;
  std::mutex mu_;

 private:
  void FinishLocked(grpc::Status status) {
    finished_ = true;
    Finish(std::move(status));
  }

  // The next message is read on the hub's thread, not here: gRPC's callback threads must not
  // wait for the coordinator's lock (held during store writes), or every call's callbacks wait.
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      if (!finished_) {
        FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      }
      return;
    }
    hub_.WakeAfter(absl::ZeroDuration(), weak_from_this());
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    PumpLocked();
  }

  void OnDone() override {
    if (subscription_ != 0) hub_.Unsubscribe(subscription_);
    hub_.Release(who_);
    // The last reference may be this one: the stream is deleted when it goes, last thing.
    std::shared_ptr<FeedStream> self = std::move(self_);
  }

  const Principal who_;
  TokenRecheck token_{[this] { return hub_.Validate(who_); }};  // Guarded by mu_.
  std::shared_ptr<FeedStream> self_;
  int64_t subscription_ = 0;
  grpc::ByteBuffer buffer_;  // the message in flight
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
};

class WatchStream : public FeedStream {
 public:
  WatchStream(Coordinator& coordinator, StreamHub& hub, Principal who, const JobView& job,
              int64_t from_sequence)
      : FeedStream(hub, std::move(who)),
        coordinator_(coordinator),
        job_id_(job.record.id),
        after_(from_sequence > 0 ? from_sequence - 1 : job.last_event_seq),
        ended_at_start_(IsTerminal(job.record.state)) {
    v1::WatchJobResponse first;
    *first.mutable_snapshot() = ToProto(job);
    rpc::SerializeResponse(first, &snapshot_);
  }

 private:
  Next NextLocked(grpc::ByteBuffer* out, grpc::Status* status) override {
    if (!snapshot_sent_) {
      snapshot_sent_ = true;
      *out = snapshot_;
      snapshot_.Clear();
      return Next::kWrite;
    }
    if (events_.empty()) {
      absl::StatusOr<EventBatch> batch =
          coordinator_.WaitEvents(job_id_, after_, absl::ZeroDuration(), kEventsPerRead);
      if (!batch.ok()) {
        *status = rpc::ToGrpc(batch.status());
        return Next::kFinish;
      }
      events_.assign(batch->events.begin(), batch->events.end());
      terminal_ = batch->terminal;
      more_ = batch->more;
    }
    if (!events_.empty()) {
      v1::WatchJobResponse message;
      *message.mutable_event() = ToProto(events_.front());
      after_ = events_.front().sequence;
      events_.pop_front();
      rpc::SerializeResponse(message, out);
      return Next::kWrite;
    }
    if ((terminal_ || ended_at_start_) && !more_) {
      *status = grpc::Status::OK;
      return Next::kFinish;
    }
    return Next::kWait;
  }

  Coordinator& coordinator_;
  const std::string job_id_;
  int64_t after_;
  const bool ended_at_start_;
  grpc::ByteBuffer snapshot_;
  bool snapshot_sent_ = false;
  std::deque<JobEventView> events_;
  bool terminal_ = false;
  bool more_ = false;
};

class MetricsStream : public FeedStream {
 public:
  MetricsStream(Coordinator& coordinator, StreamHub& hub, Principal who, std::string job_id,
                int64_t cursor)
      : FeedStream(hub, std::move(who)),
        coordinator_(coordinator),
        job_id_(std::move(job_id)),
        cursor_(cursor) {}

 private:
  Next NextLocked(grpc::ByteBuffer* out, grpc::Status* status) override {
    absl::StatusOr<PointBatch> batch =
        coordinator_.WaitPoints(job_id_, cursor_, absl::ZeroDuration(), kPointsPerMessage);
    if (!batch.ok()) {
      *status = rpc::ToGrpc(batch.status());
      return Next::kFinish;
    }
    if (batch->points.empty()) {
      if (!batch->terminal) return Next::kWait;
      *status = grpc::Status::OK;
      return Next::kFinish;
    }
    v1::StreamMetricsResponse message;
    for (const MetricPoint& point : batch->points) *message.add_points() = ToProto(point);
    cursor_ = batch->next_cursor;
    rpc::SerializeResponse(message, out);
    return Next::kWrite;
  }

  Coordinator& coordinator_;
  const std::string job_id_;
  int64_t cursor_;
};

class LogFollowStream : public FeedStream {
 public:
  LogFollowStream(StreamHub& hub, Principal who, std::unique_ptr<JobLogCursor> cursor)
      : FeedStream(hub, std::move(who)), cursor_(std::move(cursor)) {}

 private:
  Next NextLocked(grpc::ByteBuffer* out, grpc::Status* status) override {
    while (true) {
      if (reading_ || waiting_) return Next::kWait;
      if (pending_.has_value()) {
        absl::StatusOr<JobLogCursor::Step> step = std::move(*pending_);
        pending_.reset();
        if (!step.ok()) {
          *status = rpc::ToGrpc(step.status());
          return Next::kFinish;
        }
        then_ = step->then;
        if (step->write) {
          rpc::SerializeResponse(ToMessage(step->part), out);
          return Next::kWrite;
        }
        continue;
      }
      switch (then_) {
        case JobLogCursor::Then::kEnd:
          *status = grpc::Status::OK;
          return Next::kFinish;
        case JobLogCursor::Then::kWait:
          waiting_ = true;
          then_ = JobLogCursor::Then::kRead;
          hub_.WakeAfter(kLogFollowInterval, weak_from_this());
          return Next::kWait;
        case JobLogCursor::Then::kRead: {
          reading_ = true;
          auto self = std::static_pointer_cast<LogFollowStream>(shared_from_this());
          hub_.RunBlocking([self] { self->ReadOne(); });
          return Next::kWait;
        }
      }
    }
  }

  // The follow timer is the only thing that wakes a log stream.
  void OnWakeLocked() override { waiting_ = false; }

  // On a blocking-read thread; the cursor is this call's alone while reading_.
  void ReadOne() {
    absl::StatusOr<JobLogCursor::Step> step = cursor_->Read();
    std::lock_guard<std::mutex> lock(mu_);
    reading_ = false;
    pending_ = std::move(step);
    PumpLocked();
  }

  static v1::GetJobLogsResponse ToMessage(const LogPart& part) {
    v1::GetJobLogsResponse out;
    out.set_data(part.data);
    out.set_offset(part.offset);
    out.set_size(part.size);
    out.set_attempt(part.source.attempt);
    out.set_rank(part.source.rank);
    out.set_worker_id(part.source.worker_id);
    out.set_stream(ToProto(part.stream));
    out.set_truncated(part.truncated);
    return out;
  }

  std::unique_ptr<JobLogCursor> cursor_;
  JobLogCursor::Then then_ = JobLogCursor::Then::kRead;
  std::optional<absl::StatusOr<JobLogCursor::Step>> pending_;
  bool reading_ = false;
  bool waiting_ = false;
};

}  // namespace

RawWriteReactor* FinishedStream(const grpc::Status& status) { return new FinishedReactor(status); }

RawWriteReactor* StartWatchStream(Coordinator& coordinator, StreamHub& hub, const Principal& who,
                                  const JobView& job, int64_t from_sequence) {
  auto stream = std::make_shared<WatchStream>(coordinator, hub, who, job, from_sequence);
  return stream->Start(job.record.id);
}

RawWriteReactor* StartMetricsStream(Coordinator& coordinator, StreamHub& hub, const Principal& who,
                                    const std::string& job_id, int64_t cursor) {
  auto stream = std::make_shared<MetricsStream>(coordinator, hub, who, job_id, cursor);
  return stream->Start(job_id);
}

RawWriteReactor* StartLogStream(StreamHub& hub, const Principal& who,
                                std::unique_ptr<JobLogCursor> cursor) {
  auto stream = std::make_shared<LogFollowStream>(hub, who, std::move(cursor));
  return stream->Start("");
}

}  // namespace deepnet::coordinator
