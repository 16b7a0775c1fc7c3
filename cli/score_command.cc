#include "cli/score_command.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/durable_file.h"
#include "cli/commands.h"
#include "data/bleu.h"
#include "data/chrf.h"
#include "data/unicode_text.h"

namespace deepnet::cli {
namespace {

// The lines of a UTF-8 text file, split as sacreBLEU reads them.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  absl::StatusOr<std::string> text = checkpoint::ReadFileToString(path);
  if (!text.ok()) return text.status();
  if (const std::optional<size_t> bad = data::FindInvalidUtf8(*text)) {
    const auto line = 1 + std::count(text->begin(), text->begin() + *bad, '\n');
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", line, ": not valid UTF-8 (byte offset ", *bad, ")"));
  }
  return data::SplitScoringLines(*text);
}

nlohmann::json BleuJson(const data::BleuScore& bleu) {
  nlohmann::json j;
  j["score"] = bleu.score;
  j["counts"] = bleu.counts;
  j["totals"] = bleu.totals;
  j["precisions"] = bleu.precisions;
  j["bp"] = bleu.bp;
  j["ratio"] = bleu.ratio();
  j["hyp_len"] = bleu.sys_len;
  j["ref_len"] = bleu.ref_len;
  j["signature"] = data::kBleuSignature;
  j["verbose_score"] = data::FormatBleuDetail(bleu);
  return j;
}

}  // namespace

int RunScore(const ScoreCommand& command, std::ostream& out, std::ostream& err) {
  if (command.format != "text" && command.format != "json") {
    err << "deepnet score: unknown --format '" << command.format << "' (text or json)\n";
    return kExitBadInput;
  }
  auto hyps = ReadLines(command.hyp_path);
  if (!hyps.ok()) {
    err << "deepnet score: hypotheses: " << hyps.status().message() << "\n";
    return kExitBadInput;
  }
  auto refs = ReadLines(command.ref_path);
  if (!refs.ok()) {
    err << "deepnet score: references: " << refs.status().message() << "\n";
    return kExitBadInput;
  }
  if (hyps->size() != refs->size()) {
    err << "deepnet score: " << command.hyp_path << " has " << hyps->size() << " lines but "
        << command.ref_path << " has " << refs->size() << "\n";
    return kExitBadInput;
  }
  if (hyps->empty()) {
    err << "deepnet score: nothing to score: " << command.hyp_path << " and " << command.ref_path
        << " are empty\n";
    return kExitBadInput;
  }
  // The counts were checked above, so neither can fail.
  const absl::StatusOr<data::BleuScore> bleu = data::CorpusBleu(*hyps, *refs);
  const absl::StatusOr<data::ChrfScore> chrf = data::CorpusChrf(*hyps, *refs);
  if (!bleu.ok() || !chrf.ok()) {
    err << "deepnet score: " << (bleu.ok() ? chrf.status() : bleu.status()).message() << "\n";
    return kExitBadInput;
  }

  if (command.format == "json") {
    nlohmann::json j;
    j["lines"] = hyps->size();
    j["bleu"] = BleuJson(*bleu);
    j["chrf2"] = {{"score", chrf->score},
                  {"signature", data::kChrfSignature},
                  {"hyp_ngrams", chrf->hyp_ngrams},
                  {"ref_ngrams", chrf->ref_ngrams},
                  {"matches", chrf->matches}};
    out << j.dump() << "\n";
  } else {
    out << data::FormatBleu(*bleu) << "\n"
        << data::FormatChrf(*chrf) << "\n"
        << "BLEU signature: " << data::kBleuSignature << "\n"
        << "chrF2 signature: " << data::kChrfSignature << "\n";
  }
  return kExitOk;
}

}  // namespace deepnet::cli
