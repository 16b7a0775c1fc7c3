#pragma once
// JobService's server streams on gRPC's callback API: a stream holds no thread while it waits.
// WatchJob and StreamMetrics wake when their job's feed changes (StreamHub); GetJobLogs runs
// each worker round trip on the hub's blocking-read threads and waits between polls on a
// timer. Each stream has at most one message in flight: a slow reader holds one message and a
// cursor, never a backlog. A stream ends with the client's cancellation (CANCELLED), its
// feed's end (OK), or the coordinator shutting down (UNAVAILABLE).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/grpc/job_log_stream.h"
#include "coordinator/grpc/stream_hub.h"
#include "deepnet/v1/job_service.pb.h"

namespace deepnet::coordinator {

using RawWriteReactor = grpc::ServerWriteReactor<grpc::ByteBuffer>;

// A stream that ends at once with `status` (a refused call).
RawWriteReactor* FinishedStream(const grpc::Status& status);

// The caller owns a place in the hub (StreamHub::Acquire for `who`); the stream gives it back
// when gRPC is done with it. The returned reactor deletes itself.
RawWriteReactor* StartWatchStream(Coordinator& coordinator, StreamHub& hub, const Principal& who,
                                  const JobView& job, int64_t from_sequence);
RawWriteReactor* StartMetricsStream(Coordinator& coordinator, StreamHub& hub, const Principal& who,
                                    const std::string& job_id, int64_t cursor);
RawWriteReactor* StartLogStream(StreamHub& hub, const Principal& who,
                                std::unique_ptr<JobLogCursor> cursor);

}  // namespace deepnet::coordinator
