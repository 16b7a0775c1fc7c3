// `deepnet`: train, inspect and translate with DeepNet models. Parses flags only; the work is
// done by the Run* functions of cli/.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/data_command.h"
#include "cli/eval_command.h"
#include "cli/plan_command.h"
#include "cli/prepare_command.h"
#include "cli/score_command.h"
#include "cli/train_stop.h"
#include "experiment/experiment_command.h"
#include "train/runtime_threads.h"
#include "version/deepnet_version.h"

namespace {

std::atomic<bool> g_stop{false};

// Slurm preemption and Kubernetes eviction send SIGTERM: finish the step, checkpoint, exit.
extern "C" void OnTerminate(int signal) {
  deepnet::cli::NoteStopSignal(signal);
  g_stop.store(true);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace deepnet;
  using namespace deepnet::cli;
  // Only the subcommands that run the model need fast BLAS kernels; the others stay one process.
  if (argc > 1 && (std::string(argv[1]) == "train" || std::string(argv[1]) == "eval" ||
                   std::string(argv[1]) == "translate")) {
    train::ReexecWithFasterOpenBlasKernels(argv);
  }
  // Before anything slow (a launcher may send SIGTERM at any moment): `deepnet train` then
  // stops honestly instead of dying (cli/train_stop.h). Set again below; exec resets it.
  if (argc > 1 && std::string(argv[1]) == "train") {
    std::signal(SIGTERM, OnTerminate);
    std::signal(SIGINT, OnTerminate);
  }
  CLI::App app{"DeepNet: data, training, evaluation and translation with very deep Transformers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ProgramVersion());

  TrainCommand train;
  auto* train_cmd = app.add_subcommand("train", "Train a model from a YAML job file");
  train_cmd->add_option("--config,-c", train.config_path, "Job file (YAML)")->required();
  train_cmd->add_option("--set", train.overrides, "Override a field: key.path=value (repeatable)");
  train_cmd->add_option("--log-format", train.log_format, "Progress format")
      ->check(CLI::IsMember({"text", "json"}));
  train_cmd->add_flag("--no-memory-check", train.no_memory_check,
                      "Start even when the memory estimate exceeds the available memory");
  train_cmd->add_flag("--validate-config", train.validate_only,
                      "Print the effective configuration and exit");

  InspectCommand inspect;
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

  TranslateCommand translate;
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

  ScoreCommand score;
  auto* score_cmd = app.add_subcommand("score", "Corpus BLEU and chrF2 of a hypothesis file, as sacreBLEU");
  score_cmd->add_option("--hyp", score.hyp_path, "Hypotheses, one per line")->required();
  score_cmd->add_option("--ref", score.ref_path, "References, one per line")->required();
  score_cmd->add_option("--format", score.format)->check(CLI::IsMember({"text", "json"}));

  EvalCommand eval;
  auto* eval_cmd = app.add_subcommand("eval", "Translate a test split and report BLEU and chrF2");
  eval_cmd->add_option("--checkpoint", eval.checkpoint, "Checkpoint folder or checkpoint.dir")
      ->required();
  eval_cmd->add_option("--test-dir", eval.test_dir, "Corpus folder with <split>.<locale>.tsv");
  eval_cmd->add_option("--split", eval.split, "Split to evaluate (test, valid)");
  eval_cmd->add_option("--tsv", eval.tsv, "Or: one TSV of src_lang, tgt_lang, src, tgt lines");
  eval_cmd->add_option("--directions", eval.directions)->check(CLI::IsMember({"en2x", "x2en", "both"}));
  eval_cmd->add_option("--locales", eval.locales, "Only these locales")->delimiter(',');
  eval_cmd->add_option("--max-sentences", eval.max_sentences, "Per direction; 0 = all");
  eval_cmd->add_option("--beam", eval.beam_size, "Beam size")->check(CLI::Range(1, 64));
  eval_cmd->add_option("--length-penalty", eval.length_penalty, "Length penalty");
  eval_cmd->add_option("--batch", eval.batch_size, "Sentences decoded together")
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--format", eval.format)->check(CLI::IsMember({"text", "json"}));
  eval_cmd->add_option("--device", eval.device, "cpu or cuda[:N]");

  PlanCommand plan;
  auto* plan_cmd = app.add_subcommand(
      "plan", "Predict memory per GPU and step time of a job on a P x D layout (docs/GPU.md)");
  plan_cmd->add_option("config", plan.config_path, "Job file (YAML)")->required();
  plan_cmd->add_option("--set", plan.overrides, "Override a field: key.path=value (repeatable)");
  plan_cmd->add_option("--stages,-P", plan.stages, "Pipeline stages (default: the job's)")
      ->check(CLI::PositiveNumber);
  plan_cmd
      ->add_option("--replicas,-D", plan.replicas, "Data-parallel replicas (default: the job's)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--micro-batches", plan.micro_batches, "Micro-batches per step")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--tokens", plan.tokens, "Tokens per micro-batch and side (data.max_tokens)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--precision", plan.precision,
                       "Compute precision (default: the job's runtime.precision, auto resolved "
                       "for its runtime.device as training does)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  plan_cmd->add_option("--gpu-memory", plan.gpu_memory,
                       "Memory per GPU, e.g. 80GB; exit 3 if it does not fit");
  plan_cmd
      ->add_option("--tflops", plan.tflops,
                   "Matmul TFLOP/s per GPU (default: H100 at the precision)")
      ->check(CLI::NonNegativeNumber);
  plan_cmd->add_option("--efficiency", plan.efficiency, "Share of --tflops a stage achieves (MFU)")
      ->check(CLI::Range(0.01, 1.0));
  plan_cmd->add_option("--allreduce-gbps", plan.allreduce_gbps, "All-reduce bus bandwidth, GB/s")
      ->check(CLI::NonNegativeNumber);
  plan_cmd->add_option("--p2p-gbps", plan.p2p_gbps, "Stage-to-stage bandwidth, GB/s")
      ->check(CLI::NonNegativeNumber);
  plan_cmd->add_option("--vocab", plan.vocab, "Vocabulary when model.vocab_size is 0")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_flag("--simulate", plan.simulate,
                     "Replay the step under the job's schedule, stage by stage (docs/GPU.md)");
  plan_cmd->add_option("--p2p-latency-us", plan.p2p_latency_us,
                       "Latency of one stage-to-stage transfer, microseconds (--simulate)");
  plan_cmd->add_option("--format", plan.format)->check(CLI::IsMember({"text", "tsv"}));

  auto* data_cmd = app.add_subcommand("data", "Build corpora, tokenizers and shards");
  data_cmd->require_subcommand(1);
  FetchL10nCommand fetch;
  auto* fetch_cmd = data_cmd->add_subcommand(
      "fetch-l10n", "Download Debian localisation packages (apt-get download) and unpack .mo files");
  fetch_cmd->add_option("--script", fetch.script, "The fetch script");
  fetch_cmd->add_option("--l10n-dir", fetch.l10n_dir, "Where to put debs/, extracted/, manifest.tsv");
  BuildCorpusCommand corpus;
  auto* corpus_cmd = data_cmd->add_subcommand(
      "build-corpus", "Read gettext catalogues into English->X parallel text per locale");
  corpus_cmd->add_option("--root", corpus.roots, "Folders to search for */LC_MESSAGES/*.mo");
  corpus_cmd->add_option("--out", corpus.out_dir, "Output folder");
  corpus_cmd->add_option("--locales", corpus.locales, "Only these locales")->delimiter(',');
  corpus_cmd->add_option("--min-pairs", corpus.min_pairs, "Drop locales with fewer pairs");
  corpus_cmd->add_option("--max-pairs", corpus.max_pairs_per_locale, "Cap per locale; 0 = none");
  corpus_cmd->add_option("--max-source-words", corpus.max_source_words,
                         "Leave out pairs whose English has more words; 0 = no limit")
      ->check(CLI::NonNegativeNumber);
  corpus_cmd->add_flag("--drop-placeholders", corpus.drop_placeholders,
                       "Leave out pairs whose English holds %s, {0}, <b> or &amp;");
  corpus_cmd->add_option("--valid-fraction", corpus.valid_fraction, "Share of English sources");
  corpus_cmd->add_option("--test-fraction", corpus.test_fraction, "Share of English sources");
  data::ShardBuildOptions prepare;
  auto* prepare_cmd = data_cmd->add_subcommand(
      "prepare", "Train the shared SentencePiece model and write binarised shards");
  prepare_cmd->add_option("--corpus", prepare.input_dir, "Folder of <split>.<locale>.tsv")->required();
  prepare_cmd->add_option("--out", prepare.output_dir, "Output folder")->required();
  prepare_cmd->add_option("--locales", prepare.locales, "Only these locales")->delimiter(',');
  prepare_cmd->add_option("--directions", prepare.direction)->check(CLI::IsMember({"en2x", "x2en", "both"}));
  prepare_cmd->add_option("--vocab-size", prepare.vocab_size, "SentencePiece vocabulary");
  prepare_cmd->add_option("--model-type", prepare.model_type)
      ->check(CLI::IsMember({"unigram", "bpe", "char", "word"}));
  prepare_cmd->add_option("--temperature", prepare.temperature, "Language sampling temperature");
  prepare_cmd->add_option("--training-sentences", prepare.training_sentences, "Sentences in the mix");
  prepare_cmd->add_option("--max-len", prepare.max_len, "Drop longer pairs (tokens)");
  prepare_cmd->add_option("--threads", prepare.num_threads, "SentencePiece threads");
  prepare_cmd->add_option("--seed", prepare.seed, "Sampling seed");

  auto* experiment_cmd = app.add_subcommand(
      "experiment", "Run a sweep of training runs and plot it (docs/CLI.md, deepnet experiment)");
  experiment_cmd->require_subcommand(1);
  experiment::ExperimentRunCommand experiment_run;
  auto* experiment_run_cmd = experiment_cmd->add_subcommand(
      "run", "Run a sweep (resumes one already in --out), write results.jsonl and plots");
  experiment_run_cmd->add_option("--preset", experiment_run.preset,
                                 "A built-in sweep (deepnet experiment list-presets)");
  experiment_run_cmd->add_option("--spec", experiment_run.spec_path, "A sweep spec (YAML)");
  experiment_run_cmd->add_option("--out", experiment_run.out_dir, "Output folder (spec: out)");
  experiment_run_cmd->add_option("--budget-minutes", experiment_run.budget_minutes,
                                 "Compute budget of the whole sweep (spec: budget.minutes)");
  experiment_run_cmd->add_option(
      "--set", experiment_run.sets,
      "axes.KEY=[v,...], budget.*, plateau.*, out=DIR, or a job override key.path=value "
      "(repeatable)");
  experiment_run_cmd->add_option("--trainer", experiment_run.trainer,
                                 "The deepnet program to run (default: this one)");
  experiment_run_cmd->add_flag("--no-plots", experiment_run.no_plots, "Write results only");
  experiment_run_cmd->add_option("--coordinator", experiment_run.coordinator,
                                 "Submit the runs as jobs to this coordinator (HOST:PORT)");
  experiment_run_cmd->add_option("--deepnetctl", experiment_run.deepnetctl,
                                 "The deepnetctl program (default: beside this one, else PATH)");
  experiment_run_cmd->add_option("--token-file", experiment_run.token_file,
                                 "deepnetctl --token-file (default: DEEPNET_TOKEN*)");
  std::string experiment_plot_dir;
  auto* experiment_plot_cmd = experiment_cmd->add_subcommand(
      "plot", "Redraw a sweep's plots from its results.jsonl (needs gnuplot)");
  experiment_plot_cmd->add_option("dir", experiment_plot_dir, "The sweep's output folder")
      ->required();
  auto* experiment_list_cmd =
      experiment_cmd->add_subcommand("list-presets", "List the built-in sweeps");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitBadInput;
  }

  if (*train_cmd) {
    std::signal(SIGTERM, OnTerminate);
    std::signal(SIGINT, OnTerminate);
    return RunTrain(train, &g_stop, std::cout, std::cerr);
  }
  if (*experiment_run_cmd) {
    std::signal(SIGTERM, OnTerminate);
    std::signal(SIGINT, OnTerminate);
    return experiment::RunExperiment(experiment_run, &g_stop, std::cout, std::cerr);
  }
  if (*experiment_plot_cmd) {
    return experiment::PlotExperiment(experiment_plot_dir, std::cout, std::cerr);
  }
  if (*experiment_list_cmd) return experiment::ListPresets(std::cout);
  if (*inspect_cmd) {
    auto parsed = model::ParseNormVariant(norm);
    if (!parsed) {
      std::cerr << "deepnet inspect: --norm: unknown variant '" << norm
                << "' (allowed: deepnorm, post_ln, pre_ln, post_ln_init, deepnorm_preln)\n";
      return cli::kExitBadInput;
    }
    inspect.model = model::DeepNetConfig()
                        .encoder_layers(n)
                        .decoder_layers(m)
                        .d_model(d)
                        .heads(h)
                        .ffn_dim(f)
                        .vocab_size(v)
                        .norm(*parsed);
    return RunInspect(inspect, std::cout, std::cerr);
  }
  if (*plan_cmd) return RunPlan(plan, std::cout, std::cerr);
  if (*score_cmd) return RunScore(score, std::cout, std::cerr);
  if (*eval_cmd) return RunEval(eval, std::cout, std::cerr);
  if (*fetch_cmd) return RunFetchL10n(fetch, std::cout, std::cerr);
  if (*corpus_cmd) return RunBuildCorpus(corpus, std::cout, std::cerr);
  if (*prepare_cmd) return RunPrepare(prepare, std::cout, std::cerr);
  return RunTranslate(translate, std::cin, std::cout, std::cerr);
}
