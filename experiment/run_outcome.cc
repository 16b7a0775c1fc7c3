#include "experiment/run_outcome.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepnet::experiment {
namespace {

// A JSON number, or NaN for null/strings ("nan" and "inf" print as null in JSON).
double Number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nan("");
  return it->get<double>();
}

}  // namespace

void TrainLog::AddLine(const std::string& line) {
  if (line.empty() || line.front() != '{') return;
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  const std::string event = j.value("event", "");
  const int64_t step =
      j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : -1;
  if (event == "step") {
    last_step = std::max(last_step, step);
    const double loss = Number(j, "loss");
    if (!std::isfinite(loss)) non_finite_loss = true;
    last_loss = loss;
    losses.emplace_back(step, loss);
    const double norm = Number(j, "update_norm");
    if (!has_probe_lines && std::isfinite(norm)) {
      probe.push_back({{"step", step}, {"update_norm", norm}});
    }
  } else if (event == "valid") {
    valid.emplace_back(step, Number(j, "loss"));
  } else if (event == "probe") {
    if (!has_probe_lines) probe.clear();  // Probe lines replace what step lines gave.
    has_probe_lines = true;
    nlohmann::json p = {{"step", step}};
    for (const auto& [key, value] : j.items()) {
      if (key != "event" && key != "step") p[key] = value;
    }
    probe.push_back(std::move(p));
  } else if (event == "diagnostics") {
    ++diagnostics_lines;
    diagnostics.push_back({{"step", step}, {"summary", j.value("summary", nlohmann::json())}});
  } else if (event == "guard" || event == "plateau") {
    nlohmann::json e = j;
    e.erase("event");
    e["kind"] = event;
    guard_events.push_back(std::move(e));
  }
  if (event == "guard") {
    const std::string action = j.value("action", "");
    if (action == "fail") {
      guard_failed = true;
      guard_reason = j.value("reason", j.value("message", std::string("guard failed the run")));
    } else if (action == "rollback") {
      ++guard_rollbacks;
    }
  } else if (event == "plateau") {
    plateau_event = true;
  } else if (event == "stop") {
    static const std::regex kReason(R"(^step \d+ \(([a-z_]+)\))");
    std::smatch m;
    const std::string message = j.value("message", "");
    if (std::regex_search(message, m, kReason)) stop_reason = m[1];
  }
}

bool IsPlateau(const std::vector<std::pair<int64_t, double>>& valid, const PlateauRule& rule) {
  if (valid.size() < 2) return false;
  const size_t reference = valid.size() >= 3 && valid.front().first == 0 ? 1 : 0;
  const double first = valid[reference].second;
  const double last = valid.back().second;
  if (!std::isfinite(first) || !std::isfinite(last)) return false;
  if (last <= rule.fraction * first) return false;
  if (valid.size() < 3) return true;
  // The last `window` share of the steps: the best loss at or before its start against the end.
  const int64_t first_step = valid.front().first;
  const int64_t last_step = valid.back().first;
  const double window_start =
      static_cast<double>(last_step) - rule.window * static_cast<double>(last_step - first_step);
  double before = valid.front().second;
  for (const auto& [step, loss] : valid) {
    if (static_cast<double>(step) <= window_start && std::isfinite(loss))
      before = std::min(before, loss);
  }
  return last > (1.0 - rule.min_improvement) * before;
}

Verdict Classify(const TrainLog& log, const RunEnd& end, const PlateauRule& rule) {
  const bool says_diverged = absl::StrContains(end.stderr_tail, "diverged") ||
                             absl::StrContains(end.stderr_tail, "loss is nan") ||
                             absl::StrContains(end.stderr_tail, "loss is inf");
  if (log.guard_failed) return {"diverged", "guard: " + log.guard_reason};
  if (log.non_finite_loss || (end.exit_code != 0 && says_diverged)) {
    return {"diverged",
            log.non_finite_loss ? "non-finite training loss" : "the trainer reported divergence"};
  }
  for (const auto& [step, loss] : log.valid) {
    if (!std::isfinite(loss))
      return {"diverged", absl::StrCat("non-finite validation loss at step ", step)};
  }
  if (end.killed_for_budget || log.stop_reason == "max_minutes") {
    return {"budget", absl::StrCat("the sweep's compute budget ran out at step ", log.last_step)};
  }
  if (end.exit_code != 0) {
    std::string tail = end.stderr_tail;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    const size_t nl = tail.rfind('\n');
    return {
        "failed",
        absl::StrCat("exit code ", end.exit_code,
                     tail.empty() ? "" : ": " + tail.substr(nl == std::string::npos ? 0 : nl + 1))};
  }
  if (log.stop_reason == "signal") return {"failed", "stopped by a signal"};
  if (log.plateau_event) return {"plateau", "the trainer flagged a plateau"};
  if (IsPlateau(log.valid, rule)) {
    return {
        "plateau",
        absl::StrFormat(
            "validation loss %.4g at step %d -> %.4g at the end (above %.2g x the former, "
            "and less than %.0f%% better over the last %.0f%% of the run)",
            log.valid[log.valid.size() >= 3 && log.valid.front().first == 0].second,
            log.valid[log.valid.size() >= 3 && log.valid.front().first == 0].first,
            log.valid.back().second, rule.fraction, 100 * rule.min_improvement, 100 * rule.window)};
  }
  return {"ok", ""};
}

}  // namespace deepnet::experiment
