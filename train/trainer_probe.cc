// The trainer's probe (||dF||, ||F0||, the logits' norms on the probe batch, on the steps of
// train.probe_schedule) and per-layer diagnostics (every train.diagnostics_every steps).

#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/parallel_corpus.h"
#include "train/layer_summary.h"
#include "train/trainer.h"

namespace deepnet::train {
namespace {

std::optional<double> Ratio(double num, double den) {
  if (den > 0.0) return num / den;
  return std::nullopt;
}

}  // namespace

absl::Status Trainer::SetUpProbe() {
  const job::TrainConfig& tc = config_.train;
  if (tc.probe_schedule.empty()) {
    probe_schedule_ = job::ProbeSchedule::Every(tc.probe_every);
  } else {
    auto schedule = job::ProbeSchedule::Parse(tc.probe_schedule);
    if (!schedule.ok()) return schedule.status();
    probe_schedule_ = *std::move(schedule);
  }
  if (!tc.probe_file.empty()) {
    // Pairs in the direction of the first language pair (or with their own language columns),
    // tokenized like the training data; every pair of the file is in the probe batch.
    const LanguagePair& first = data_.pairs.front();
    auto text = data::ReadTsvCorpus(tc.probe_file, first.src_lang, first.tgt_lang);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("train.probe_file: ", text.status().message()));
    }
    if (text->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("train.probe_file: ", tc.probe_file, " has no probe pairs"));
    }
    if (static_cast<int64_t>(text->size()) > job::SpecCaps::kProbeSentences) {
      return absl::InvalidArgumentError(
          absl::StrCat("train.probe_file: ", tc.probe_file, " has ", text->size(),
                       " pairs; at most ", job::SpecCaps::kProbeSentences, " make a probe batch"));
    }
    int64_t dropped = 0;
    const int64_t max_len = config_.model.max_positions();
    probe_file_examples_ = data::TokenizeCorpus(*text, *data_.tokenizer, max_len, &dropped);
    if (dropped > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("train.probe_file: ", tc.probe_file, ": ", dropped, " of ", text->size(),
                       " pairs are longer than model.max_positions (", max_len,
                       " tokens) or in a direction the tokenizer has no tag for"));
    }
  }
  const auto& probe_set = ProbeSet();
  const int64_t count = tc.probe_file.empty()
                            ? std::min<int64_t>(tc.probe_sentences, probe_set.size())
                            : static_cast<int64_t>(probe_set.size());
  for (int64_t i = 0; i < count; ++i) probe_indices_.push_back(i);
  return absl::OkStatus();
}

bool Trainer::DiagnosticStep(int64_t step) const {
  const int64_t every = config_.train.diagnostics_every;
  return every > 0 && step % every == 0;
}

absl::Status Trainer::ProbeAndDiagnose(StepMetrics* m) {
  if (probe_schedule_.Contains(step_)) {
    auto norms = ProbeNorm();
    if (!norms.ok()) return norms.status();
    job::ProbeLine p;
    p.step = step_;
    p.update_norm = norms->update_norm;
    p.f0_norm = norms->f0_norm;
    p.update_norm_relative = Ratio(norms->update_norm, norms->f0_norm);
    if (norms->has_logits) {
      p.logits_update_norm = norms->logits_update_norm;
      p.logits_f0_norm = norms->logits_f0_norm;
      p.logits_update_norm_relative = Ratio(norms->logits_update_norm, norms->logits_f0_norm);
    }
    m->update_norm = p.update_norm;
    m->update_norm_relative = p.update_norm_relative;
    reporter_->Probe(p);
  }
  if (DiagnosticStep(step_)) {
    auto diagnosed = engine_->Diagnose(ProbeBatch());
    if (!diagnosed.ok()) return diagnosed.status();
    job::DiagnosticsLine d;
    d.step = step_;
    d.other_grad_norm = diagnosed->other_grad_norm;
    const int64_t n = config_.model.encoder_layers();
    std::vector<double> ln, grad;
    for (size_t l = 0; l < diagnosed->ln_input_norm.size(); ++l) {
      const int64_t layer = static_cast<int64_t>(l);
      d.per_layer.push_back({layer < n ? "encoder" : "decoder", layer < n ? layer : layer - n,
                             diagnosed->ln_input_norm[l], diagnosed->grad_norm[l]});
      ln.push_back(diagnosed->ln_input_norm[l]);
      grad.push_back(diagnosed->grad_norm[l]);
    }
    d.layers = static_cast<int64_t>(d.per_layer.size());
    d.ln_input_norm = SummarizeLayers(std::move(ln));
    d.grad_norm = SummarizeLayers(std::move(grad));
    reporter_->Diagnostics(d);
  }
  return absl::OkStatus();
}

}  // namespace deepnet::train
