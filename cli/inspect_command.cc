#include "cli/inspect_command.h"

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "job/job_config.h"

namespace deepnet::cli {
namespace {

nlohmann::json OrNull(const std::optional<model::StackScaling>& s, bool alpha) {
  if (!s) return nullptr;
  return alpha ? s->alpha : s->beta;
}

std::string Human(double value, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (value >= 1000.0 && i < 5) value /= 1000.0, ++i;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s%s", value, prefixes[i], unit);
  return buf;
}

std::string Bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024.0 && i < 4) bytes /= 1024.0, ++i;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", bytes, units[i]);
  return buf;
}

}  // namespace

std::string InspectJson(const model::DeepNetConfig& c, const model::StatsOptions& o,
                        const job::MemoryLayout& layout) {
  const model::ModelStats s = model::ComputeModelStats(c, o);
  nlohmann::json j;
  j["encoder_layers"] = c.encoder_layers();
  j["decoder_layers"] = c.decoder_layers();
  j["d_model"] = c.d_model();
  j["heads"] = c.heads();
  j["ffn_dim"] = c.ffn_dim();
  j["vocab_size"] = c.vocab_size();
  j["norm"] = std::string(model::ToString(c.norm()));
  j["encoder.alpha"] = OrNull(s.scaling.encoder, true);
  j["encoder.beta"] = OrNull(s.scaling.encoder, false);
  j["decoder.alpha"] = OrNull(s.scaling.decoder, true);
  j["decoder.beta"] = OrNull(s.scaling.decoder, false);
  j["parameters"] = s.parameters;
  j["embedding_parameters"] = s.embedding_parameters;
  j["encoder_layer_parameters"] = s.encoder_layer_parameters;
  j["decoder_layer_parameters"] = s.decoder_layer_parameters;
  j["source_length"] = o.source_length;
  j["target_length"] = o.target_length;
  j["forward_flops_per_source_token"] = s.forward_flops_per_source_token;
  j["forward_flops_per_target_token"] = s.forward_flops_per_target_token;
  j["train_flops_per_token"] = s.train_flops_per_token;
  j["parameter_bytes"] = s.parameter_bytes;
  j["gradient_bytes"] = s.gradient_bytes;
  j["optimizer_bytes"] = s.optimizer_bytes;
  j["training_state_bytes"] = s.parameter_bytes + s.gradient_bytes + s.optimizer_bytes;
  const job::MemoryEstimate e = job::EstimateMemory(c, layout);
  const job::StageMemory& r = e.largest;
  j["memory_per_rank"] = {{"precision", std::string(job::ToString(layout.precision))},
                          {"pipeline_stages", e.stages},
                          {"micro_batches", layout.micro_batches},
                          {"schedule", layout.gpipe ? "gpipe" : "1f1b"},
                          {"tokens_per_micro_batch", layout.tokens_per_micro_batch},
                          {"sequence_length", layout.sequence_length},
                          {"stage", r.stage},
                          {"layers", r.layers},
                          {"parameters", r.parameters},
                          {"parameter_bytes", r.parameter_bytes},
                          {"gradient_bytes", r.gradient_bytes},
                          {"optimizer_bytes", r.optimizer_bytes},
                          {"position_table_bytes", r.buffer_bytes},
                          {"activation_bytes_per_micro_batch", r.activation_bytes_per_micro_batch},
                          {"live_micro_batches", r.live_micro_batches},
                          {"activation_bytes", r.activation_bytes},
                          {"total_bytes", r.total_bytes},
                          {"biggest_part", e.biggest_part()},
                          {"saturated", e.saturated}};
  return j.dump(2);
}

std::string InspectText(const model::DeepNetConfig& c, const model::StatsOptions& o,
                        const job::MemoryLayout& layout) {
  const model::ModelStats s = model::ComputeModelStats(c, o);
  std::ostringstream out;
  char buf[256];
  out << model::DescribeShape(c) << "\n";
  for (auto [name, stack] : {std::pair{"encoder", s.scaling.encoder}, {"decoder", s.scaling.decoder}}) {
    if (stack) {
      std::snprintf(buf, sizeof(buf), "  %s: alpha = %.6f  beta = %.6f\n", name, stack->alpha, stack->beta);
    } else {
      std::snprintf(buf, sizeof(buf), "  %s: absent\n", name);
    }
    out << buf;
  }
  out << "  parameters:            " << s.parameters << " (" << Human(s.parameters, "") << ")\n";
  out << "    embeddings:          " << s.embedding_parameters << "\n";
  out << "    per encoder layer:   " << s.encoder_layer_parameters << "\n";
  out << "    per decoder layer:   " << s.decoder_layer_parameters << "\n";
  out << "  training FLOPs/token:  " << Human(s.train_flops_per_token, "FLOP") << " (source "
      << o.source_length << ", target " << o.target_length << " tokens)\n";
  out << "  memory (fp32):         parameters " << Bytes(s.parameter_bytes) << ", gradients "
      << Bytes(s.gradient_bytes) << ", Adam " << Bytes(s.optimizer_bytes) << ", total "
      << Bytes(s.parameter_bytes + s.gradient_bytes + s.optimizer_bytes) << "\n";
  const job::MemoryEstimate e = job::EstimateMemory(c, layout);
  const job::StageMemory& r = e.largest;
  out << "  memory per rank (" << job::ToString(layout.precision) << ", " << e.stages
      << " pipeline stage(s), " << layout.micro_batches << " micro-batch(es), "
      << (layout.gpipe ? "gpipe" : "1f1b") << ", " << layout.tokens_per_micro_batch
      << " tokens per micro-batch, sequences up to " << layout.sequence_length << "):\n";
  out << "    largest rank:        stage " << r.stage << " (" << r.layers << " layers, "
      << r.parameters << " parameters)\n";
  out << "    parameters:          " << job::FormatBytes(r.parameter_bytes) << "\n";
  out << "    gradients:           " << job::FormatBytes(r.gradient_bytes) << "\n";
  out << "    optimizer state:     " << job::FormatBytes(r.optimizer_bytes) << "\n";
  out << "    activations:         " << job::FormatBytes(r.activation_bytes) << " ("
      << r.live_micro_batches << " live x " << job::FormatBytes(r.activation_bytes_per_micro_batch)
      << ")\n";
  out << "    position table:      " << job::FormatBytes(r.buffer_bytes) << "\n";
  out << "    total:               " << job::FormatBytes(r.total_bytes)
      << " (biggest part: " << e.biggest_part() << ")\n";
  return out.str();
}

int RunInspect(const InspectCommand& command, std::ostream& out, std::ostream& err) {
  model::DeepNetConfig config = command.model;
  job::MemoryLayout layout = job::LayoutOf(job::JobConfig{});
  if (!command.config_path.empty()) {
    auto job_config = job::LoadJobConfig(command.config_path);
    if (!job_config.ok()) {
      err << "deepnet inspect: " << job_config.status().message() << "\n";
      return kExitBadInput;
    }
    config = job_config->model;
    if (config.vocab_size() == 0) config.vocab_size(command.model.vocab_size());
    layout = job::LayoutOf(*job_config);
  }
  try {
    model::Validate(config);
  } catch (const c10::Error& e) {
    err << "deepnet inspect: " << e.what_without_backtrace() << "\n";
    return kExitBadInput;
  }
  out << (command.format == "json" ? InspectJson(config, command.stats, layout) + "\n"
                                   : InspectText(config, command.stats, layout));
  return kExitOk;
}

}  // namespace deepnet::cli
