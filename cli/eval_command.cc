#include "cli/eval_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "data/bleu.h"
#include "data/chrf.h"
#include "data/parallel_corpus.h"

namespace deepnet::cli {
namespace {

using Direction = std::pair<std::string, std::string>;  // (src_lang, tgt_lang)

// Source/reference sentences per direction, from the corpus folder or the TSV file.
absl::StatusOr<std::map<Direction, std::vector<data::ParallelExample>>> ReadTestSets(
    const EvalCommand& c, const Translator& translator) {
  namespace fs = std::filesystem;
  std::map<Direction, std::vector<data::ParallelExample>> sets;
  auto has_tag = [&](const std::string& lang) { return translator.tokenizer().LangTagId(lang).has_value(); };
  if (!c.tsv.empty()) {
    auto pairs = data::ReadTsvCorpus(c.tsv, "", "");
    if (!pairs.ok()) return pairs.status();
    for (auto& ex : *pairs) {
      if (has_tag(ex.tgt_lang)) sets[{ex.src_lang, ex.tgt_lang}].push_back(std::move(ex));
    }
    return sets;
  }
  std::error_code ec;
  if (!fs::is_directory(c.test_dir, ec)) return absl::NotFoundError("--test-dir: no folder " + c.test_dir);
  const std::string prefix = c.split + ".";
  for (const auto& entry : fs::directory_iterator(c.test_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || entry.path().extension() != ".tsv") continue;
    const std::string locale = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    if (!c.locales.empty() &&
        std::find(c.locales.begin(), c.locales.end(), locale) == c.locales.end()) {
      continue;
    }
    auto pairs = data::ReadTsvCorpus(entry.path().string(), "en", locale);
    if (!pairs.ok()) return pairs.status();
    for (auto& ex : *pairs) {
      if ((c.directions == "en2x" || c.directions == "both") && has_tag(ex.tgt_lang)) {
        sets[{ex.src_lang, ex.tgt_lang}].push_back(ex);
      }
      if ((c.directions == "x2en" || c.directions == "both") && has_tag(ex.src_lang)) {
        sets[{ex.tgt_lang, ex.src_lang}].push_back({ex.tgt_lang, ex.src_lang, ex.tgt, ex.src});
      }
    }
  }
  if (sets.empty()) {
    return absl::NotFoundError(absl::StrCat("no ", c.split, ".<locale>.tsv in ", c.test_dir,
                                            " for a language this model knows"));
  }
  return sets;
}

}  // namespace

absl::StatusOr<EvalReport> Evaluate(Translator& translator, const EvalCommand& c) {
  const auto start = std::chrono::steady_clock::now();
  auto sets = ReadTestSets(c, translator);
  if (!sets.ok()) return sets.status();
  model::SearchOptions search;
  search.beam_size = c.beam_size;
  search.length_penalty = c.length_penalty;
  translator.set_batch_size(c.batch_size);
  EvalReport report;
  for (auto& [direction, examples] : *sets) {
    if (c.max_sentences > 0 && static_cast<int64_t>(examples.size()) > c.max_sentences) {
      examples.resize(c.max_sentences);
    }
    std::vector<std::string> sources, refs;
    for (const auto& ex : examples) {
      sources.push_back(ex.src);
      refs.push_back(ex.tgt);
    }
    auto hyps = translator.Translate(sources, direction.second, search);
    if (!hyps.ok()) return hyps.status();
    auto bleu = data::CorpusBleu(*hyps, refs);
    if (!bleu.ok()) return bleu.status();
    auto chrf = data::CorpusChrf(*hyps, refs);
    if (!chrf.ok()) return chrf.status();
    DirectionScore score{direction.first, direction.second, static_cast<int64_t>(examples.size()),
                         bleu->score, chrf->score, data::FormatBleuDetail(*bleu)};
    if (score.tgt_lang == "en") {
      report.x2en_bleu += score.bleu, report.x2en_chrf += score.chrf, ++report.x2en_count;
    } else if (score.src_lang == "en") {
      report.en2x_bleu += score.bleu, report.en2x_chrf += score.chrf, ++report.en2x_count;
    }
    report.directions.push_back(std::move(score));
  }
  if (report.x2en_count > 0) report.x2en_bleu /= report.x2en_count, report.x2en_chrf /= report.x2en_count;
  if (report.en2x_count > 0) report.en2x_bleu /= report.en2x_count, report.en2x_chrf /= report.en2x_count;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

int RunEval(const EvalCommand& c, std::ostream& out, std::ostream& err) {
  if (c.tsv.empty() == c.test_dir.empty()) {
    err << "deepnet eval: give exactly one of --test-dir and --tsv\n";
    return kExitBadInput;
  }
  auto translator = Translator::Open(c.checkpoint, c.device);
  if (!translator.ok()) {
    err << "deepnet eval: " << translator.status().message() << "\n";
    return kExitBadInput;
  }
  auto report = Evaluate(**translator, c);
  if (!report.ok()) {
    err << "deepnet eval: " << report.status().message() << "\n";
    return absl::IsNotFound(report.status()) || absl::IsInvalidArgument(report.status())
               ? kExitBadInput
               : kExitFailure;
  }
  if (c.format == "json") {
    nlohmann::json j;
    j["signature"] = data::kBleuSignature;
    j["step"] = (*translator)->step();
    for (const auto& d : report->directions) {
      j["directions"].push_back({{"src", d.src_lang}, {"tgt", d.tgt_lang}, {"sentences", d.sentences},
                                 {"bleu", d.bleu}, {"chrf2", d.chrf}});
    }
    j["x2en"] = {{"bleu", report->x2en_bleu}, {"chrf2", report->x2en_chrf}, {"directions", report->x2en_count}};
    j["en2x"] = {{"bleu", report->en2x_bleu}, {"chrf2", report->en2x_chrf}, {"directions", report->en2x_count}};
    j["seconds"] = report->seconds;
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  char line[256];
  out << "checkpoint step " << (*translator)->step() << ", beam " << c.beam_size << ", "
      << data::kBleuSignature << "\n";
  std::snprintf(line, sizeof(line), "%-12s %9s %8s %8s\n", "direction", "sentences", "BLEU", "chrF2");
  out << line;
  for (const auto& d : report->directions) {
    std::snprintf(line, sizeof(line), "%-12s %9lld %8.2f %8.2f\n", (d.src_lang + "-" + d.tgt_lang).c_str(),
                  static_cast<long long>(d.sentences), d.bleu, d.chrf);
    out << line;
  }
  if (report->x2en_count > 0) {
    std::snprintf(line, sizeof(line), "%-12s %9lld %8.2f %8.2f\n", "avg X->en",
                  static_cast<long long>(report->x2en_count), report->x2en_bleu, report->x2en_chrf);
    out << line;
  }
  if (report->en2x_count > 0) {
    std::snprintf(line, sizeof(line), "%-12s %9lld %8.2f %8.2f\n", "avg en->X",
                  static_cast<long long>(report->en2x_count), report->en2x_bleu, report->en2x_chrf);
    out << line;
  }
  return kExitOk;
}

}  // namespace deepnet::cli
