#pragma once
// The typed job events of the API (deepnet.v1.JobEvent) kept in the JobStore's event log,
// which stores (kind, message) pairs: the store writes "state" events itself; the coordinator
// writes the others with a JSON message carrying the typed fields.

#include <string>
#include <vector>

#include "coordinator/core/coordinator_types.h"
#include "coordinator/store/job_store.h"

namespace deepnet::coordinator {

// The (kind, message) the store keeps for a non-state event. `event.type` must not be
// kStateChanged (the store writes those).
struct EncodedEvent {
  std::string kind;
  std::string message;
};
EncodedEvent EncodeJobEvent(const JobEventView& event);

// Decodes a job's stored events, in sequence order, that follow the ones already decoded.
// `*attempt` carries the decoder's attempt count between calls (0 before the job's first event):
// state events take it, counting the transitions into STARTING. An event that cannot be decoded
// becomes kOther with its raw text (never dropped).
std::vector<JobEventView> DecodeJobEvents(const std::vector<JobEvent>& events, int* attempt);

}  // namespace deepnet::coordinator
