#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/translator.h"

namespace deepnet::cli {

struct EvalCommand {
  std::string checkpoint;  // Checkpoint folder or checkpoint.dir.
  // Corpus folder with `<split>.<locale>.tsv` (lines `en<TAB>locale<TAB>src<TAB>tgt`, as
  // `deepnet data build-corpus` writes them) ...
  std::string test_dir;
  std::string split = "test";
  // ... or one TSV file of 4-column lines `src_lang<TAB>tgt_lang<TAB>src<TAB>tgt`.
  std::string tsv;
  std::string directions = "both";   // en2x | x2en | both (test_dir only)
  std::vector<std::string> locales;  // Empty: every locale found that the model has a tag for.
  int64_t max_sentences = 0;         // Per direction; 0 means all.
  int64_t beam_size = 4;
  double length_penalty = 1.0;
  int64_t batch_size = 16;
  std::string format = "text";  // text | json
  std::string device = "cpu";
};

/// Quality of one translation direction, scored as sacreBLEU scores it.
struct DirectionScore {
  std::string src_lang;
  std::string tgt_lang;
  int64_t sentences = 0;
  double bleu = 0.0;
  double chrf = 0.0;
  std::string bleu_detail;  // "BLEU = 35.12 70.1/45.3/30.2/20.1 (BP = ...)"
};

struct EvalReport {
  std::vector<DirectionScore> directions;
  // Averages over directions into English and out of English (the paper's Table III).
  double x2en_bleu = 0.0, x2en_chrf = 0.0, en2x_bleu = 0.0, en2x_chrf = 0.0;
  int64_t x2en_count = 0, en2x_count = 0;
  double seconds = 0.0;
};

/// Decodes every requested direction with beam search and scores it (BLEU, chrF2).
absl::StatusOr<EvalReport> Evaluate(Translator& translator, const EvalCommand& command);

/// `deepnet eval`: prints a table (or JSON). Exit codes as in commands.h.
int RunEval(const EvalCommand& command, std::ostream& out, std::ostream& err);

}  // namespace deepnet::cli
