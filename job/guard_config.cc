#include "job/guard_config.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace deepnet::job {

void ReadGuard(YamlMapReader r, GuardConfig* g) {
  r.String("enabled", &g->enabled);
  r.String("action", &g->action);
  r.Int("max_retries", &g->max_retries);
  r.Bool("skip_batches", &g->skip_batches);
  r.Double("lr_factor", &g->lr_factor);
  r.Double("loss_spike_factor", &g->loss_spike_factor);
  r.Int("loss_window", &g->loss_window);
  r.Double("update_bound", &g->update_bound);
  r.Int("plateau_window", &g->plateau_window);
  r.Double("plateau_min_delta", &g->plateau_min_delta);
  r.String("plateau_action", &g->plateau_action);
  r.Finish();
}

namespace {

void OneOf(ConfigProblems* problems, const char* field, const std::string& value,
           const char* allowed) {
  problems->Add(absl::StrCat("guard.", field),
                absl::StrCat("must be one of ", allowed, " (got '", value, "')"));
}

void IntRange(ConfigProblems* problems, const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    problems->Add(absl::StrCat("guard.", field),
                  absl::StrCat("must be in [", lo, ", ", hi, "] (got ", v, ")"));
  }
}

}  // namespace

void ValidateGuard(const GuardConfig& g, ConfigProblems* problems) {
  if (g.enabled != "auto" && g.enabled != "true" && g.enabled != "false") {
    OneOf(problems, "enabled", g.enabled, "auto, true, false");
  }
  if (g.action != "rollback" && g.action != "fail") {
    OneOf(problems, "action", g.action, "rollback, fail");
  }
  if (g.plateau_action != "none" && g.plateau_action != "rewarm") {
    OneOf(problems, "plateau_action", g.plateau_action, "none, rewarm");
  }
  IntRange(problems, "max_retries", g.max_retries, 0, SpecCaps::kRestarts);
  IntRange(problems, "loss_window", g.loss_window, 1, SpecCaps::kGuardWindow);
  IntRange(problems, "plateau_window", g.plateau_window, 0, SpecCaps::kGuardWindow);
  // !(x > 0) also catches NaN.
  if (!(g.lr_factor > 0 && g.lr_factor <= 1)) {
    problems->Add("guard.lr_factor",
                  absl::StrCat("must be in (0, 1] (got ", ShortestDouble(g.lr_factor), ")"));
  }
  if (!(g.loss_spike_factor == 0 ||
        (g.loss_spike_factor > 1 && g.loss_spike_factor <= SpecCaps::kRealMax))) {
    problems->Add("guard.loss_spike_factor",
                  absl::StrCat("must be 0 (off) or in (1, ", ShortestDouble(SpecCaps::kRealMax),
                               "] (got ", ShortestDouble(g.loss_spike_factor), ")"));
  }
  if (!(g.update_bound >= 0 && g.update_bound <= SpecCaps::kRealMax)) {
    problems->Add("guard.update_bound",
                  absl::StrCat("must be 0 (off) or in (0, ", ShortestDouble(SpecCaps::kRealMax),
                               "] (got ", ShortestDouble(g.update_bound), ")"));
  }
  if (!(g.plateau_min_delta >= 0 && g.plateau_min_delta <= SpecCaps::kRealMax)) {
    problems->Add("guard.plateau_min_delta",
                  absl::StrCat("must be in [0, ", ShortestDouble(SpecCaps::kRealMax), "] (got ",
                               ShortestDouble(g.plateau_min_delta), ")"));
  }
}

void EmitGuard(YAML::Emitter& out, const GuardConfig& g) {
  auto real = [&](const char* key, double v) {
    out << YAML::Key << key << YAML::Value << FormatDouble(v);
  };
  out << YAML::Key << "guard" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << g.enabled;
  out << YAML::Key << "action" << YAML::Value << g.action;
  out << YAML::Key << "max_retries" << YAML::Value << g.max_retries;
  out << YAML::Key << "skip_batches" << YAML::Value << g.skip_batches;
  real("lr_factor", g.lr_factor);
  real("loss_spike_factor", g.loss_spike_factor);
  out << YAML::Key << "loss_window" << YAML::Value << g.loss_window;
  real("update_bound", g.update_bound);
  out << YAML::Key << "plateau_window" << YAML::Value << g.plateau_window;
  real("plateau_min_delta", g.plateau_min_delta);
  out << YAML::Key << "plateau_action" << YAML::Value << g.plateau_action;
  out << YAML::EndMap;
}

bool GuardEnabled(const JobConfig& config) {
  if (config.guard.enabled == "auto") return config.model.norm() == model::NormVariant::kDeepNorm;
  return config.guard.enabled == "true";
}

}  // namespace deepnet::job
