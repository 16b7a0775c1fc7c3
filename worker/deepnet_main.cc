// `deepnet`: train, inspect and translate with DeepNet models. Parses flags only; the work is
// done by worker/commands.cc.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <iostream>

#include "worker/commands.h"

namespace {

std::atomic<bool> g_stop{false};

// Slurm preemption and Kubernetes eviction send SIGTERM: finish the step, checkpoint, exit.
extern "C" void OnTerminate(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  using namespace deepnet;
  CLI::App app{"DeepNet: train, inspect and translate with very deep Transformers"};
  app.require_subcommand(1);

  worker::TrainCommand train;
  auto* train_cmd = app.add_subcommand("train", "Train a model from a YAML job file");
  train_cmd->add_option("--config,-c", train.config_path, "Job file (YAML)")->required();
  train_cmd->add_option("--set", train.overrides, "Override a field: key.path=value (repeatable)");
  train_cmd->add_option("--log-format", train.log_format, "Progress format")
      ->check(CLI::IsMember({"text", "json"}));
  train_cmd->add_flag("--validate-config", train.validate_only,
                      "Print the effective configuration and exit");

  worker::InspectCommand inspect;
  int64_t n = 6, m = 6, d = 512, h = 8, f = 2048, v = 32000;
  std::string norm = "deepnorm";
  auto* inspect_cmd = app.add_subcommand("inspect", "Print alpha/beta, sizes and costs of a shape");
  inspect_cmd->add_option("--config,-c", inspect.config_path, "Take the shape from a job file");
  inspect_cmd->add_option("--encoder-layers,-N", n, "Encoder layers")->check(CLI::NonNegativeNumber);
  inspect_cmd->add_option("--decoder-layers,-M", m, "Decoder layers")->check(CLI::NonNegativeNumber);
  inspect_cmd->add_option("--d-model", d, "Model width")->check(CLI::PositiveNumber);
  inspect_cmd->add_option("--heads", h, "Attention heads")->check(CLI::PositiveNumber);
  inspect_cmd->add_option("--ffn-dim", f, "FFN width")->check(CLI::PositiveNumber);
  inspect_cmd->add_option("--vocab-size", v, "Vocabulary size")->check(CLI::PositiveNumber);
  inspect_cmd->add_option("--norm", norm, "deepnorm|post_ln|pre_ln|post_ln_init|deepnorm_preln");
  inspect_cmd->add_option("--source-length", inspect.stats.source_length, "Tokens per source");
  inspect_cmd->add_option("--target-length", inspect.stats.target_length, "Tokens per target");
  inspect_cmd->add_option("--format", inspect.format)->check(CLI::IsMember({"text", "json"}));

  worker::TranslateCommand translate;
  auto* translate_cmd =
      app.add_subcommand("translate", "Translate sentences from standard input, one per line");
  translate_cmd->add_option("--checkpoint", translate.checkpoint,
                            "Checkpoint folder, or a checkpoint.dir (its latest good checkpoint)")
      ->required();
  translate_cmd->add_option("--to", translate.to_lang, "Target language")->required();
  translate_cmd->add_option("--beam", translate.beam_size, "Beam size (1 = greedy)")
      ->check(CLI::Range(1, 64));
  translate_cmd->add_option("--length-penalty", translate.length_penalty, "Length penalty");
  translate_cmd->add_option("--device", translate.device, "cpu or cuda[:N]");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : worker::kExitBadInput;
  }

  if (*train_cmd) {
    std::signal(SIGTERM, OnTerminate);
    std::signal(SIGINT, OnTerminate);
    return worker::RunTrain(train, &g_stop, std::cout, std::cerr);
  }
  if (*inspect_cmd) {
    auto parsed = model::ParseNormVariant(norm);
    if (!parsed) {
      std::cerr << "deepnet inspect: --norm: unknown variant '" << norm
                << "' (allowed: deepnorm, post_ln, pre_ln, post_ln_init, deepnorm_preln)\n";
      return worker::kExitBadInput;
    }
    inspect.model = model::DeepNetConfig()
                        .encoder_layers(n)
                        .decoder_layers(m)
                        .d_model(d)
                        .heads(h)
                        .ffn_dim(f)
                        .vocab_size(v)
                        .norm(*parsed);
    return worker::RunInspect(inspect, std::cout, std::cerr);
  }
  return worker::RunTranslate(translate, std::cin, std::cout, std::cerr);
}
