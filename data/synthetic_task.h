#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/parallel_corpus.h"

namespace deepnet::data {

/// A generated multilingual task that needs no files: English-like sentences drawn from a
/// fixed word list, each paired with a deterministic rewrite that stands for a "language":
///   "rev": words in reverse order;        "cap": every word capitalised;
///   "gr":  letters transliterated to Greek; "pig": pig-latin words;
///   "cp":  a copy (the identity).
/// The tag of the target language goes on the source side, so one model learns every task.
struct SyntheticTaskOptions {
  // Pseudo-languages to generate, from {"rev", "cap", "gr", "pig", "cp"}; empty means all.
  std::vector<std::string> languages;
  // Sentence pairs to generate per language.
  int64_t pairs_per_language = 1000;
  // Sentence length in words, inclusive bounds.
  int64_t min_words = 2;
  int64_t max_words = 8;
  // Seeds the generator: the same options give the same corpus on every machine.
  uint64_t seed = 1;
};

/// Every pseudo-language the generator knows, in a fixed order.
std::vector<std::string> SyntheticLanguages();

/// Deterministic corpus (source language "en"); throws nothing, validates nothing beyond
/// clamping (unknown languages are skipped): the job schema validates these options
/// (job::ValidateSyntheticData, job/job_config.h) before a trainer gets here.
std::vector<ParallelExample> GenerateSyntheticCorpus(const SyntheticTaskOptions& options);

/// The rewrite of one English sentence into a pseudo-language (used by tests and docs).
std::string ApplySyntheticLanguage(const std::string& lang, const std::string& english);

}  // namespace deepnet::data
