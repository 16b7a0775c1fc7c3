#include "ctl/format.h"

#include <time.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepnet::ctl {
namespace {

std::string StripPrefix(const std::string& name, absl::string_view prefix) {
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}

}  // namespace

std::string FormatTimestamp(const google::protobuf::Timestamp& time) {
  if (!IsSet(time)) return "-";
  const time_t seconds = static_cast<time_t>(time.seconds());
  struct tm local;
  if (localtime_r(&seconds, &local) == nullptr) return absl::StrCat(time.seconds(), "s");
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &local);
  const long offset = local.tm_gmtoff;  // Seconds east of UTC.
  const long abs_offset = offset < 0 ? -offset : offset;
  return absl::StrFormat("%s%c%02d:%02d", text, offset < 0 ? '-' : '+', abs_offset / 3600,
                         abs_offset % 3600 / 60);
}

std::string FormatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return absl::StrCat(seconds, "s");
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  if (seconds < 86400) return absl::StrFormat("%dh%02dm", seconds / 3600, seconds % 3600 / 60);
  return absl::StrFormat("%dd%02dh", seconds / 86400, seconds % 86400 / 3600);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit + 1 < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatCount(double value) {
  if (!std::isfinite(value)) return absl::StrCat(value);
  const double magnitude = std::fabs(value);
  if (magnitude < 10000) return absl::StrFormat("%.0f", value);
  if (magnitude < 1e6) return absl::StrFormat("%.1fk", value / 1e3);
  if (magnitude < 1e9) return absl::StrFormat("%.2fM", value / 1e6);
  return absl::StrFormat("%.2fG", value / 1e9);
}

std::string StateName(v1::JobState state) {
  return StripPrefix(v1::JobState_Name(state), "JOB_STATE_");
}

std::string WorkerStateName(v1::WorkerState state) {
  return StripPrefix(v1::WorkerState_Name(state), "WORKER_STATE_");
}

std::string PendingCodeName(v1::PendingCode code) {
  if (code == v1::PENDING_CODE_UNSPECIFIED) return "";
  return absl::AsciiStrToLower(StripPrefix(v1::PendingCode_Name(code), "PENDING_CODE_"));
}

std::string CauseName(v1::RecoveryCause cause) {
  if (cause == v1::RECOVERY_CAUSE_UNSPECIFIED) return "";
  std::string name =
      absl::AsciiStrToLower(StripPrefix(v1::RecoveryCause_Name(cause), "RECOVERY_CAUSE_"));
  for (char& c : name) {
    if (c == '_') c = ' ';
  }
  return name;
}

std::string DeviceName(v1::DeviceKind device) {
  if (device == v1::DEVICE_KIND_UNSPECIFIED) return "";
  return absl::AsciiStrToLower(StripPrefix(v1::DeviceKind_Name(device), "DEVICE_KIND_"));
}

std::optional<v1::JobState> ParseJobState(const std::string& text) {
  std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!absl::StartsWith(upper, "JOB_STATE_")) upper = "JOB_STATE_" + upper;
  v1::JobState state;
  if (!v1::JobState_Parse(upper, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return std::nullopt;
  }
  return state;
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

int64_t SecondsBetween(const google::protobuf::Timestamp& start,
                       const google::protobuf::Timestamp& end) {
  return end.seconds() - start.seconds() + (end.nanos() - start.nanos()) / 1'000'000'000;
}

bool IsSet(const google::protobuf::Timestamp& time) {
  return time.seconds() != 0 || time.nanos() != 0;
}

}  // namespace deepnet::ctl
