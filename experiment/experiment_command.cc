#include "experiment/experiment_command.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiment/coordinator_executor.h"
#include "experiment/plots.h"
#include "experiment/presets.h"
#include "experiment/run_plan.h"
#include "experiment/sweep_runner.h"
#include "experiment/sweep_spec.h"

namespace deepnet::experiment {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInterrupted = 143;

std::string SelfPath() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("deepnet") : path.string();
}

// deepnetctl from the same build as this program when it is there, else from PATH.
std::string DefaultDeepnetctl() {
  const std::filesystem::path beside =
      std::filesystem::path(SelfPath()).parent_path() / "deepnetctl";
  std::error_code ec;
  return std::filesystem::exists(beside, ec) ? beside.string() : std::string("deepnetctl");
}

std::string PresetNames() {
  std::string names;
  for (const Preset& p : Presets()) absl::StrAppend(&names, names.empty() ? "" : ", ", p.name);
  return names;
}

}  // namespace

int RunExperiment(const ExperimentRunCommand& command, const std::atomic<bool>* stop,
                  std::ostream& out, std::ostream& err) {
  const char* who = "deepnet experiment run: ";
  if (command.preset.empty() == command.spec_path.empty()) {
    err << who << "give either --preset NAME (" << PresetNames() << ") or --spec FILE\n";
    return kExitBadInput;
  }
  absl::StatusOr<SweepSpec> spec;
  if (!command.preset.empty()) {
    std::optional<std::string> yaml = PresetYaml(command.preset);
    if (!yaml) {
      err << who << "--preset: unknown preset '" << command.preset
          << "' (allowed: " << PresetNames() << ")\n";
      return kExitBadInput;
    }
    spec = ParseSweepSpec(*yaml, "preset " + command.preset, "");
  } else {
    spec = LoadSweepSpec(command.spec_path);
  }
  if (!spec.ok()) {
    err << who << spec.status().message() << "\n";
    return kExitBadInput;
  }
  if (auto s = ApplySpecOverrides(command.sets, &*spec); !s.ok()) {
    err << who << s.message() << "\n";
    return kExitBadInput;
  }
  if (command.budget_minutes) {
    if (auto s =
            ApplySpecOverrides({absl::StrCat("budget.minutes=", *command.budget_minutes)}, &*spec);
        !s.ok()) {
      err << who << "--budget-minutes: " << s.message() << "\n";
      return kExitBadInput;
    }
  }
  if (!command.out_dir.empty()) spec->out = command.out_dir;
  if (spec->out.empty()) spec->out = "runs/experiments/" + spec->name;
  auto plan = ExpandPlan(*spec);
  if (!plan.ok()) {
    err << who << plan.status().message() << "\n";
    return kExitBadInput;
  }
  std::unique_ptr<RunExecutor> executor;
  if (command.coordinator.empty()) {
    executor =
        std::make_unique<LocalExecutor>(command.trainer.empty() ? SelfPath() : command.trainer);
  } else {
    std::vector<std::string> flags;
    if (!command.token_file.empty()) flags = {"--token-file", command.token_file};
    executor = std::make_unique<CoordinatorExecutor>(
        command.deepnetctl.empty() ? DefaultDeepnetctl() : command.deepnetctl, command.coordinator,
        flags);
  }
  RunnerOptions options;
  options.out_dir = spec->out;
  options.commit = BuildCommit();
  options.stop = stop;
  options.progress = &out;
  auto summary = RunSweep(*spec, *plan, executor.get(), options);
  if (!summary.ok()) {
    err << who << summary.status().message() << "\n";
    return kExitFailure;
  }
  std::string statuses;
  for (const auto& [status, n] : summary->by_status) {
    absl::StrAppend(&statuses, statuses.empty() ? "" : ", ", n, " ", status);
  }
  out << "[experiment] " << spec->name << ": " << summary->ran << " ran, " << summary->skipped
      << " done earlier, " << summary->not_started << " not started (budget); " << statuses << "\n";
  if (!command.no_plots) {
    auto pngs = DrawPlots(spec->out);
    if (!pngs.ok()) {
      err << who << "plots: " << pngs.status().message() << "\n";
    } else {
      for (const std::string& png : *pngs) out << "[experiment] plot " << png << "\n";
    }
  }
  out << "[experiment] results " << spec->out << "/results.jsonl\n";
  if (summary->interrupted) {
    out << "[experiment] interrupted; the same command resumes the sweep\n";
    return kExitInterrupted;
  }
  return kExitOk;
}

int PlotExperiment(const std::string& out_dir, std::ostream& out, std::ostream& err) {
  auto pngs = DrawPlots(out_dir);
  if (!pngs.ok()) {
    err << "deepnet experiment plot: " << pngs.status().message() << "\n";
    return absl::IsNotFound(pngs.status()) ? kExitBadInput : kExitFailure;
  }
  if (pngs->empty()) out << "[experiment] nothing to plot in " << out_dir << "/results.jsonl\n";
  for (const std::string& png : *pngs) out << "[experiment] plot " << png << "\n";
  return kExitOk;
}

int ListPresets(std::ostream& out) {
  for (const Preset& p : Presets()) {
    auto spec = ParseSweepSpec(p.yaml, "preset " + p.name, "");
    size_t runs = 1;
    std::string axes;
    if (spec.ok()) {
      for (const SweepAxis& a : spec->axes) {
        runs *= a.values.size();
        absl::StrAppend(&axes, axes.empty() ? "" : " x ", a.key, " (", a.values.size(), ")");
      }
    }
    out << p.name << "\t" << runs << " runs: " << axes << "\t"
        << (spec.ok() ? spec->description : std::string(spec.status().message())) << "\n";
  }
  return kExitOk;
}

}  // namespace deepnet::experiment
