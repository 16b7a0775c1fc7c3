#include "experiment/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiment/child_process.h"
#include "experiment/results.h"

namespace deepnet::experiment {
namespace {

namespace fs = std::filesystem;

std::string ValueText(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string ShortKey(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// "norm=post_ln depth=6", leaving out the axes in `skip`.
std::string Label(const nlohmann::json& row, const std::set<std::string>& skip = {}) {
  std::vector<std::string> parts;
  if (row.contains("axes") && row["axes"].is_object()) {
    // In the spec's axis order when the row has it (JSON objects come back sorted).
    std::vector<std::string> keys;
    if (row.contains("axis_order") && row["axis_order"].is_array()) {
      for (const auto& key : row["axis_order"]) {
        if (key.is_string() && row["axes"].contains(key.get<std::string>())) keys.push_back(key);
      }
    }
    if (keys.empty()) {
      for (const auto& item : row["axes"].items()) keys.push_back(item.key());
    }
    for (const std::string& key : keys) {
      if (!skip.count(key)) parts.push_back(ShortKey(key) + "=" + ValueText(row["axes"][key]));
    }
  }
  return parts.empty() ? row.value("run_id", "run") : absl::StrJoin(parts, " ");
}

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string SafeName(const std::string& text) {
  std::string out;
  for (char c : text)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return out;
}

std::optional<double> Depth(const nlohmann::json& row) {
  const nlohmann::json& axes = row.contains("axes") ? row["axes"] : nlohmann::json();
  for (const char* key : {"depth", "model.encoder_layers", "model.decoder_layers"}) {
    if (axes.is_object() && axes.contains(key) && axes[key].is_number())
      return axes[key].get<double>();
  }
  return std::nullopt;
}

// gnuplot xtics at exactly the depths swept, with some room on both sides.
std::string DepthTics(const std::set<double>& depths) {
  std::vector<std::string> tics;
  for (double d : depths) tics.push_back(absl::StrCat(d));
  if (depths.empty()) return "set xtics autofreq\n";
  return absl::StrCat("set xtics (", absl::StrJoin(tics, ", "), ")\nset xrange [",
                      *depths.begin() / 1.3, ":", *depths.rbegin() * 1.3, "]\n");
}

struct Plot {
  std::string png;
  std::string title, xlabel, ylabel;
  bool logy = false, logx = false;
  std::vector<std::pair<std::string, std::string>> series;  // (data file, title)
};

}  // namespace

absl::StatusOr<std::vector<std::string>> DrawPlots(const std::string& out_dir) {
  const fs::path out(out_dir);
  auto results = ReadResults((out / "results.jsonl").string());
  if (!results.ok()) return results.status();
  if (results->rows.empty()) {
    return absl::NotFoundError(absl::StrCat(out_dir, "/results.jsonl: no results to plot"));
  }
  // The latest row of each run, in the order runs first appear.
  std::vector<std::string> order;
  for (const auto& row : results->rows) {
    const std::string id = row["run_id"];
    if (std::find(order.begin(), order.end(), id) == order.end()) order.push_back(id);
  }
  const auto latest = LatestRows(results->rows);
  std::error_code ec;
  const fs::path plots = out / "plots";
  fs::create_directories(plots / "data", ec);
  if (ec)
    return absl::InternalError(absl::StrCat(plots.string(), ": cannot create: ", ec.message()));

  auto make = [](std::string png, std::string title, std::string xlabel, std::string ylabel,
                 bool logy, bool logx) {
    Plot p;
    p.png = std::move(png), p.title = std::move(title), p.xlabel = std::move(xlabel);
    p.ylabel = std::move(ylabel), p.logy = logy, p.logx = logx;
    return p;
  };
  // Log steps: the first few Adam steps, where Post-LN and DeepNorm part, get room.
  Plot update =
      make("update_norm.png", "Model update ||F(x,theta_t) - F(x,theta_0)|| (probe batch)", "step",
           "||dF||", true, true);
  Plot relative = make("update_norm_relative.png", "Relative model update ||dF|| / ||F0||", "step",
                       "||dF|| / ||F0||", true, true);
  // The paper's Fig. 4 in one picture: the update after the first Adam step against depth.
  Plot first_step = make("update_norm_vs_depth.png",
                         "Model update after the first step, by depth (relative when measured)",
                         "depth (encoder = decoder layers)", "||dF|| / ||F0|| at step 1 (else ||dF||)",
                         true, true);
  // label -> (depth, update at the first probed step) points
  std::map<std::string, std::vector<std::pair<double, double>>> first_by_depth;
  Plot curves =
      make("valid_curves.png", "Validation loss", "step", "validation loss", false, false);
  Plot depth =
      make("final_valid_vs_depth.png", "Final validation loss by depth (missing: diverged)",
           "depth (encoder = decoder layers)", "final validation loss", false, true);
  std::ofstream summary(plots / "summary.tsv", std::ios::trunc);
  summary << "run_id\taxes\tstatus\tfinal_valid_loss\tsteps\twall_s\treason\n";
  // label -> (depth, final validation loss, status) points
  std::map<std::string, std::vector<std::tuple<double, double, std::string>>> by_depth;
  std::set<double> depths;
  std::string sweep = "sweep";
  for (const std::string& id : order) {
    const nlohmann::json& row = latest.at(id);
    sweep = row.value("sweep", sweep);
    const std::string label = Label(row) + " [" + row.value("status", "?") + "]";
    const std::string base = SafeName(id);
    const nlohmann::json final_valid = row.value("final_valid_loss", nlohmann::json());
    summary << id << "\t" << Label(row) << "\t" << row.value("status", "") << "\t"
            << (final_valid.is_number() ? final_valid.dump() : "") << "\t" << row.value("steps", 0)
            << "\t" << row.value("wall_s", 0.0) << "\t" << row.value("reason", "") << "\n";
    if (row.contains("probe") && row["probe"].is_array() && !row["probe"].empty()) {
      std::ofstream abs_file(plots / "data" / (base + ".update_norm.dat"));
      std::ofstream rel_file(plots / "data" / (base + ".update_norm_relative.dat"));
      bool any_abs = false, any_rel = false;
      for (const auto& p : row["probe"]) {
        const auto num = [&](const char* k) {
          return p.contains(k) && p[k].is_number() && p[k].get<double>() > 0 ? p[k].get<double>()
                                                                             : NAN;
        };
        const double step = p.value("step", 0), a = num("update_norm"),
                     r = num("update_norm_relative");
        if (std::isfinite(a)) abs_file << step << " " << a << "\n", any_abs = true;
        if (std::isfinite(r)) rel_file << step << " " << r << "\n", any_rel = true;
      }
      // The first probed step's update: relative when the trainer reported it.
      const nlohmann::json& first = row["probe"][0];
      const char* key = first.contains("update_norm_relative") &&
                                first["update_norm_relative"].is_number()
                            ? "update_norm_relative"
                            : "update_norm";
      if (auto d = Depth(row); d && first.contains(key) && first[key].is_number()) {
        first_by_depth[Label(row, {"depth", "model.encoder_layers", "model.decoder_layers"})]
            .emplace_back(*d, first[key].get<double>());
        depths.insert(*d);
      }
      if (any_abs) update.series.emplace_back("data/" + base + ".update_norm.dat", label);
      if (any_rel)
        relative.series.emplace_back("data/" + base + ".update_norm_relative.dat", label);
    }
    if (row.contains("valid") && row["valid"].is_array() && !row["valid"].empty()) {
      std::ofstream f(plots / "data" / (base + ".valid.dat"));
      for (const auto& point : row["valid"]) {
        if (point.is_array() && point.size() == 2 && point[1].is_number()) {
          f << point[0].get<double>() << " " << point[1].get<double>() << "\n";
        }
      }
      curves.series.emplace_back("data/" + base + ".valid.dat", label);
    }
    if (auto d = Depth(row); d && final_valid.is_number()) {
      by_depth[Label(row, {"depth", "model.encoder_layers", "model.decoder_layers"})].emplace_back(
          *d, final_valid.get<double>(), row.value("status", "?"));
      depths.insert(*d);
    }
  }
  for (auto& [label, points] : by_depth) {
    std::sort(points.begin(), points.end());
    const std::string file = "data/depth." + SafeName(label) + ".dat";
    std::ofstream f(plots / file);
    for (const auto& [d, v, status] : points) f << d << " " << v << " " << status << "\n";
    depth.series.emplace_back(file, label == "" ? sweep : label);
  }
  for (auto& [label, points] : first_by_depth) {
    std::sort(points.begin(), points.end());
    const std::string file = "data/first_update." + SafeName(label) + ".dat";
    std::ofstream f(plots / file);
    for (const auto& [d, v] : points) f << d << " " << v << "\n";
    first_step.series.emplace_back(file, label == "" ? sweep : label);
  }
  summary.close();

  std::string script =
      "set terminal pngcairo size 1000,650 noenhanced font \",10\"\n"
      "set key outside right top\nset grid\n";
  std::vector<std::string> pngs;
  for (const Plot* plot : {&update, &relative, &first_step, &curves, &depth}) {
    if (plot->series.empty()) continue;
    absl::StrAppend(&script, "\nset output ", Quote(plot->png), "\nset title ",
                    Quote(sweep + ": " + plot->title), "\nset xlabel ", Quote(plot->xlabel),
                    "\nset ylabel ", Quote(plot->ylabel), "\n",
                    plot->logy ? "set logscale y\n" : "unset logscale y\n",
                    plot->logx ? "set logscale x 2\n" : "unset logscale x\n",
                    plot == &depth || plot == &first_step ? DepthTics(depths)
                                                          : "set xtics autofreq\n",
                    "plot ");
    for (size_t i = 0; i < plot->series.size(); ++i) {
      absl::StrAppend(&script, i ? ", \\\n     " : "", Quote(plot->series[i].first),
                      " using 1:2 with linespoints pointsize 0.6 title ",
                      Quote(plot->series[i].second));
    }
    if (plot == &depth) {  // Each point says how its run ended (ok, plateau, budget, ...).
      for (size_t i = 0; i < plot->series.size(); ++i) {
        absl::StrAppend(&script, ", \\\n     ", Quote(plot->series[i].first),
                        " using 1:2:3 with labels offset 0,0.8 font \",8\" notitle");
      }
    }
    absl::StrAppend(&script, "\n");
    pngs.push_back((plots / plot->png).string());
  }
  const std::string script_path = (plots / "plots.gp").string();
  {
    std::ofstream f(script_path, std::ios::trunc);
    f << script;
  }
  if (pngs.empty()) return pngs;
  for (const std::string& png : pngs) fs::remove(png, ec);
  // gnuplot runs in plots/, so the script's paths are relative and the folder can move.
  ChildOptions child;
  child.argv = {"/bin/sh", "-c", "cd \"$0\" && exec gnuplot plots.gp", plots.string()};
  child.stderr_path = (plots / "gnuplot.log").string();
  auto ran = RunChild(child);
  if (!ran.ok()) return ran.status();
  if (ran->exit_code == 127) {
    return absl::FailedPreconditionError(
        absl::StrCat("gnuplot not found: install gnuplot-nox (scripts/setup.sh), then run "
                     "`deepnet experiment plot ",
                     out_dir, "`"));
  }
  if (ran->exit_code != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed (exit ", ran->exit_code,
                                            "): ", FileTail(child.stderr_path, 600)));
  }
  return pngs;
}

}  // namespace deepnet::experiment
