#pragma once
// The typed job events of the API (deepnet.v1.JobEvent) kept in the JobStore's event log,
// which stores (kind, message) pairs: the store writes "state" events itself; the coordinator
// writes the others with a JSON message carrying the typed fields.

#include <string>
#include <vector>

#include "coordinator/coordinator_types.h"
#include "coordinator/job_store.h"

namespace deepnet::coordinator {

// The (kind, message) the store keeps for a non-state event. `event.type` must not be
// kStateChanged (the store writes those).
struct EncodedEvent {
  std::string kind;
  std::string message;
};
EncodedEvent EncodeJobEvent(const JobEventView& event);

// Decodes a job's stored events in sequence order. Attempts of state events are counted from
// the transitions into STARTING, so `events` must start at the job's first event for them to
// be right; an event that cannot be decoded becomes a STATE_CHANGED-less kind with only its
// message (never dropped).
std::vector<JobEventView> DecodeJobEvents(const std::vector<JobEvent>& events);

}  // namespace deepnet::coordinator
