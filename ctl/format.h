#pragma once
// Text formatting shared by deepnetctl's outputs: times in local ISO-8601, human-readable
// durations and sizes, short names of the deepnet.v1 enums and their parsing from the command
// line. Pure functions (local time comes from the process's time zone); thread-safe.

#include <cstdint>
#include <optional>
#include <string>

#include "deepnet/v1/job_service.pb.h"

namespace deepnet::ctl {

// "2026-11-24T14:03:07+01:00" in the local time zone; "-" for an unset (zero) timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& time);

// "45s", "3m05s", "2h03m", "4d07h"; negative values are shown as "0s".
std::string FormatDuration(int64_t seconds);

// "512 B", "1.5 KiB", "3.2 GiB".
std::string FormatBytes(int64_t bytes);

// Compact number for tables: "1234", "12.3k", "4.56M".
std::string FormatCount(double value);

// "RUNNING" for JOB_STATE_RUNNING (the enum name without its prefix).
std::string StateName(v1::JobState state);
// "READY" for WORKER_STATE_READY.
std::string WorkerStateName(v1::WorkerState state);
// "exceeds_registered" for PENDING_CODE_EXCEEDS_REGISTERED (the coordinator's metric label);
// "" for UNSPECIFIED.
std::string PendingCodeName(v1::PendingCode code);
// "rank exit", "worker lost", "hang", "start timeout"; "" for UNSPECIFIED.
std::string CauseName(v1::RecoveryCause cause);
// "cpu", "cuda"; "" for UNSPECIFIED.
std::string DeviceName(v1::DeviceKind device);

// Parses "running", "RUNNING" or "JOB_STATE_RUNNING" (any case); nullopt for an unknown name
// or UNSPECIFIED.
std::optional<v1::JobState> ParseJobState(const std::string& text);

// SUCCEEDED, FAILED or CANCELLED.
bool IsTerminal(v1::JobState state);

// Seconds between two timestamps (end - start); both must be set.
int64_t SecondsBetween(const google::protobuf::Timestamp& start,
                       const google::protobuf::Timestamp& end);

// True when the timestamp is set (not the zero value).
bool IsSet(const google::protobuf::Timestamp& time);

}  // namespace deepnet::ctl
