#include "cli/plan_command.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <ostream>

#include "cli/commands.h"
#include "cli/plan_simulation.h"
#include "job/job_config.h"
#include "job/layout_plan.h"
#include "job/memory_estimate.h"

namespace deepnet::cli {
namespace {

// Matrix-product TFLOP/s of one H100 SXM at each precision, when --tflops is not given: bf16 as
// measured on the GPU test machine (an 8192^3 bf16 matmul, 770-800), TF32 half of it, and fp32
// without tensor cores the datasheet's 67.
double DefaultTflops(job::PrecisionChoice precision) {
  if (precision == job::PrecisionChoice::kBf16) return 790.0;
  if (precision == job::PrecisionChoice::kTf32) return 395.0;
  return 67.0;
}

}  // namespace

int64_t ParseByteSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return -1;
  double value = 0.0;
  try {
    value = std::stod(text.substr(0, i));
  } catch (...) {
    return -1;
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double scale = 0.0;
  if (unit.empty() || unit == "B")
    scale = 1.0;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  else if (unit == "KiB")
    scale = 1024.0;
  else if (unit == "MiB")
    scale = 1024.0 * 1024.0;
  else if (unit == "GiB")
    scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "TiB")
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else
    return -1;
  const double bytes = value * scale;
  if (!(bytes > 0.0) || bytes > 9.0e18) return -1;
  return static_cast<int64_t>(std::llround(bytes));
}

int RunPlan(const PlanCommand& c, std::ostream& out, std::ostream& err) {
  auto config = job::LoadJobConfig(c.config_path, c.overrides);
  if (!config.ok()) {
    err << "deepnet plan: " << config.status().message() << "\n";
    return kExitBadInput;
  }
  // Unless --precision says otherwise, the precision the trainer would run the job at: its
  // runtime.precision with auto resolved for its runtime.device, as the trainer resolves it.
  const std::optional<job::PrecisionChoice> precision =
      c.precision.empty() ? std::optional<job::PrecisionChoice>(job::EffectivePrecision(config->runtime))
                          : job::ParseChoice<job::PrecisionChoice>(c.precision);
  if (!precision || *precision == job::PrecisionChoice::kAuto) {
    err << "deepnet plan: --precision: must be fp32, tf32 or bf16 (got " << c.precision << ")\n";
    return kExitBadInput;
  }
  job::PlanOptions o;
  o.layout = job::LayoutOf(*config);
  // TF32 changes the matmul rate, not what is stored.
  o.layout.precision =
      *precision == job::PrecisionChoice::kBf16 ? job::Precision::kBf16 : job::Precision::kFp32;
  if (c.stages > 0) o.layout.pipeline_stages = c.stages;
  if (c.micro_batches > 0) o.layout.micro_batches = c.micro_batches;
  if (c.tokens > 0) o.layout.tokens_per_micro_batch = c.tokens;
  o.replicas = c.replicas > 0 ? c.replicas : config->parallel.data_parallel;
  model::DeepNetConfig model = config->model;
  const int64_t layers = model.encoder_layers() + model.decoder_layers();
  if (o.layout.pipeline_stages > layers) {
    err << "deepnet plan: --stages: " << o.layout.pipeline_stages << " stages for " << layers
        << " layers (at most one stage per layer)\n";
    return kExitBadInput;
  }
  bool assumed_vocab = false;
  if (model.vocab_size() <= 0) {
    model.vocab_size(c.vocab);
    assumed_vocab = true;
  }
  if (!c.gpu_memory.empty()) {
    o.gpu_memory_bytes = ParseByteSize(c.gpu_memory);
    if (o.gpu_memory_bytes <= 0) {
      err << "deepnet plan: --gpu-memory: not a size (got '" << c.gpu_memory
          << "'; e.g. 80GB, 80GiB, 81559MiB)\n";
      return kExitBadInput;
    }
  }
  o.peak_tflops = c.tflops >= 0.0 ? c.tflops : DefaultTflops(*precision);
  o.efficiency = c.efficiency;
  o.allreduce_gbps = c.allreduce_gbps;
  o.p2p_gbps = c.p2p_gbps;
  const job::LayoutPlan plan = job::PlanLayout(model, o);
  if (c.format == "tsv") {
    out << job::FormatPlan(plan, o, "tsv");
  } else {
    out << c.config_path << ": " << model.encoder_layers() << "L-" << model.decoder_layers()
        << "L d" << model.d_model() << " ffn" << model.ffn_dim() << " V" << model.vocab_size()
        << (assumed_vocab ? " (model.vocab_size unset: --vocab assumed)" : "") << "\n";
    out << job::FormatPlan(plan, o, "text");
  }
  if (c.simulate) {
    if (c.p2p_latency_us < 0.0) {
      err << "deepnet plan: --p2p-latency-us: must be >= 0 (got " << c.p2p_latency_us << ")\n";
      return kExitBadInput;
    }
    auto simulated = SimulatePlannedStep(model, o, config->parallel.schedule,
                                         c.p2p_latency_us * 1e-6);
    if (!simulated.ok()) {
      err << "deepnet plan: --simulate: " << simulated.status().message() << "\n";
      return kExitBadInput;
    }
    out << *simulated;
  }
  return plan.fits ? kExitOk : kExitDoesNotFit;
}

}  // namespace deepnet::cli
