#pragma once

#include <iosfwd>
#include <string>

namespace deepnet::cli {

/// `deepnet score --hyp H --ref R [--format text|json]`.
struct ScoreCommand {
  // Hypotheses: UTF-8 text, one segment per line.
  std::string hyp_path;
  // References: line i is the reference of hypothesis line i.
  std::string ref_path;
  // "text": sacreBLEU-style lines; "json": one JSON object.
  std::string format = "text";
};

/// Scores the hypotheses against the references with sacreBLEU-compatible corpus BLEU and chrF2
/// (data/bleu.h, data/chrf.h) and prints the result to `out`. Returns kExitOk, or kExitBadInput
/// with a message naming the path on `err` when a file cannot be read or is not UTF-8, the line
/// counts differ, both files are empty, or the format is unknown. Reads both files whole.
int RunScore(const ScoreCommand& command, std::ostream& out, std::ostream& err);

}  // namespace deepnet::cli
