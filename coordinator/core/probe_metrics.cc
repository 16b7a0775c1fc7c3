#include "coordinator/core/probe_metrics.h"

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <utility>

namespace deepnet::coordinator {
namespace {

prometheus::Family<prometheus::Gauge>& Build(prometheus::Registry& registry, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

TrainingSample::LayerStats Stats(const LayerSummaryValues& s) {
  return {s.min, s.max, s.mean, s.p50, s.p90};
}

}  // namespace

struct ProbeGauges::Impl {
  using Family = prometheus::Family<prometheus::Gauge>;
  explicit Impl(prometheus::Registry& registry);
  void SetOne(const std::string& job_id, Family& family, const std::string& stat, double value);

  Family& probe_step_;
  Family& f0_norm_;
  Family& update_norm_relative_;
  Family& logits_update_norm_;
  Family& logits_update_norm_relative_;
  Family& diagnostics_step_;
  Family& ln_input_norm_;
  Family& layer_grad_norm_;
  // job -> (family, stat label or "") -> gauge.
  std::map<std::string, std::map<std::pair<Family*, std::string>, prometheus::Gauge*>> series_;
};

void SetProbeAndDiagnostics(const std::vector<MetricPoint>& points, TrainingSample* sample) {
  for (auto it = points.rbegin(); it != points.rend(); ++it) {
    if (!sample->probe && it->probe_step > 0) {
      sample->probe =
          TrainingSample::Probe{it->probe_step, it->f0_norm, it->update_norm_relative,
                                it->logits_update_norm, it->logits_update_norm_relative};
    }
    if (!sample->diagnostics && it->diagnostics_step > 0) {
      sample->diagnostics = TrainingSample::Diagnostics{
          it->diagnostics_step, Stats(it->ln_input_norm), Stats(it->layer_grad_norm)};
    }
  }
}

ProbeGauges::Impl::Impl(prometheus::Registry& registry)
    : probe_step_(Build(registry, "deepnet_job_probe_step",
                        "Step of a job's latest model-update probe (train.probe_schedule).")),
      f0_norm_(Build(registry, "deepnet_job_f0_norm",
                     "||F(x, theta_0)||: norm of the model's output on the probe batch at the "
                     "start of training.")),
      update_norm_relative_(Build(registry, "deepnet_job_update_norm_relative",
                                  "Relative model update ||dF|| / ||F0|| at the latest probe.")),
      logits_update_norm_(Build(registry, "deepnet_job_logits_update_norm",
                                "Update of the output logits on the probe batch at the latest "
                                "probe.")),
      logits_update_norm_relative_(Build(registry, "deepnet_job_logits_update_norm_relative",
                                         "Relative update of the output logits at the latest "
                                         "probe.")),
      diagnostics_step_(Build(registry, "deepnet_job_diagnostics_step",
                              "Step of a job's latest per-layer diagnostics "
                              "(train.diagnostics_every).")),
      ln_input_norm_(Build(registry, "deepnet_job_layer_ln_input_norm",
                           "LayerNorm-input norm over a job's layers at the latest diagnostics "
                           "(stat=min|p50|p90|max|mean).")),
      layer_grad_norm_(Build(registry, "deepnet_job_layer_grad_norm",
                             "Per-layer gradient norm over a job's layers at the latest "
                             "diagnostics (stat=min|p50|p90|max|mean).")) {}

void ProbeGauges::Impl::SetOne(const std::string& job_id, Family& family, const std::string& stat,
                               double value) {
  prometheus::Gauge*& gauge = series_[job_id][{&family, stat}];
  if (gauge == nullptr) {
    prometheus::Labels labels = {{"job", job_id}};
    if (!stat.empty()) labels["stat"] = stat;
    gauge = &family.Add(labels);
  }
  gauge->Set(value);
}

ProbeGauges::ProbeGauges(prometheus::Registry& registry)
    : impl_(std::make_unique<Impl>(registry)) {}
ProbeGauges::~ProbeGauges() = default;

void ProbeGauges::Set(const std::string& job_id, const TrainingSample& sample) {
  Impl& m = *impl_;
  using Family = Impl::Family;
  if (const auto& p = sample.probe) {
    m.SetOne(job_id, m.probe_step_, "", static_cast<double>(p->step));
    m.SetOne(job_id, m.f0_norm_, "", p->f0_norm);
    m.SetOne(job_id, m.update_norm_relative_, "", p->update_norm_relative);
    m.SetOne(job_id, m.logits_update_norm_, "", p->logits_update_norm);
    m.SetOne(job_id, m.logits_update_norm_relative_, "", p->logits_update_norm_relative);
  }
  if (const auto& d = sample.diagnostics) {
    m.SetOne(job_id, m.diagnostics_step_, "", static_cast<double>(d->step));
    for (auto [family, stats] : {std::pair<Family*, const TrainingSample::LayerStats*>{
                                     &m.ln_input_norm_, &d->ln_input_norm},
                                 {&m.layer_grad_norm_, &d->grad_norm}}) {
      m.SetOne(job_id, *family, "min", stats->min);
      m.SetOne(job_id, *family, "p50", stats->p50);
      m.SetOne(job_id, *family, "p90", stats->p90);
      m.SetOne(job_id, *family, "max", stats->max);
      m.SetOne(job_id, *family, "mean", stats->mean);
    }
  }
}

void ProbeGauges::Remove(const std::string& job_id) {
  auto it = impl_->series_.find(job_id);
  if (it == impl_->series_.end()) return;
  for (auto& [key, gauge] : it->second) key.first->Remove(gauge);
  impl_->series_.erase(it);
}

}  // namespace deepnet::coordinator
