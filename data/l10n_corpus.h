#pragma once

// Builds an English->X parallel corpus from gettext catalogues (docs/DATA.md): finds every
// */LC_MESSAGES/*.mo under the roots, reads and cleans it, and writes per-locale train/valid/test
// TSV files that data::ReadTsvCorpus reads.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/l10n_cleanup.h"

namespace deepnet::data {

/// The roots searched when L10nCorpusOptions::roots is empty: the system's catalogues and what
/// scripts/fetch_l10n.sh extracts (relative to the working directory).
std::vector<std::string> DefaultL10nRoots();

/// Catalogue domains left out by default: the name lists (1-2 words per entry, not sentences) of
/// iso-codes (iso_639-3, iso_3166-2, ...), libgweather-4-common (libgweather-4.0-locations) and
/// libkf5unitconversion-data (kunitconversion5), per docs/DATA.md.
std::vector<std::string> DefaultExcludedL10nDomains();

struct L10nCorpusOptions {
  // Folders searched recursively (directory symlinks not followed) for */LC_MESSAGES/*.mo;
  // empty means DefaultL10nRoots(). A root that does not exist is reported, not an error.
  std::vector<std::string> roots;
  // Output folder, created when missing. Required.
  std::string out_dir;
  // Locales to build, in NormalizeLocale form ("de", "pt_BR", "sr@latin"); empty means all.
  std::vector<std::string> locales;
  // Catalogue domains (file names without ".mo") to leave out; empty keeps every catalogue.
  std::vector<std::string> exclude_domains = DefaultExcludedL10nDomains();
  // Locales with fewer pairs than this after clean-up and dedupe are left out (and listed in
  // the summary); 0 keeps every locale with at least one pair.
  int64_t min_pairs = 0;
  // Pairs kept per locale, a sample stable across machines (smallest pair hashes); 0 = no cap.
  int64_t max_pairs_per_locale = 0;
  // Pairs whose English source has more words (runs of non-space characters) than this are left
  // out of every split; 0 keeps all. Short interface strings (menu items, buttons, messages)
  // are what a small model learns first.
  int64_t max_source_words = 0;
  // Leaves out pairs whose English source holds a placeholder (HasPlaceholder: %s, {0}, <b>,
  // &amp;), keeping plain sentences only.
  bool drop_placeholders = false;
  // Fractions of English sentences (not pairs) in valid and test, chosen by a hash of the
  // source, so a sentence lands in the same split in every locale. Each in [0, 1], sum <= 1.
  double valid_fraction = 0.01;
  double test_fraction = 0.01;
};

[[nodiscard]] absl::Status Validate(const L10nCorpusOptions& options);

enum class CorpusSplit { kTrain, kValid, kTest };
const char* CorpusSplitName(CorpusSplit split);  // "train", "valid", "test"

/// 64-bit FNV-1a (Fowler, Noll, Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t Fnv1a64(std::string_view bytes);

/// The split of an English source: FNV-1a 64 of its bytes, mixed by SplitMix64's finaliser,
/// as a fraction u in [0, 1) from the top 53 bits; u < valid -> valid, u < valid + test -> test,
/// else train. Depends on nothing but the bytes, so it is the same on every machine.
CorpusSplit SplitForSource(std::string_view english, double valid_fraction, double test_fraction);

struct L10nLocaleSummary {
  std::string locale;
  int64_t files = 0;  // Catalogues read for this locale.
  int64_t train = 0;  // Pairs per split.
  int64_t valid = 0;
  int64_t test = 0;
  int64_t total() const { return train + valid + test; }
};

struct SkippedFile {
  std::string path;
  std::string reason;
};

struct L10nCorpusSummary {
  std::vector<std::string> roots;                    // As searched.
  std::vector<std::string> roots_missing;            // Roots that do not exist.
  std::vector<L10nLocaleSummary> locales;            // Locales written, sorted by code.
  std::vector<L10nLocaleSummary> locales_below_min;  // Not written: no pairs, or < min_pairs.
  int64_t total_pairs = 0;                           // Over locales written.
  int64_t unique_english = 0;                        // Distinct sources over locales written.
  int64_t files_found = 0;                           // */LC_MESSAGES/*.mo files under the roots.
  int64_t files_out_of_scope = 0;          // English, not a locale name, or not in options.locales.
  int64_t files_excluded_domain = 0;       // In options.exclude_domains.
  int64_t files_duplicate = 0;             // Same bytes as a catalogue already read for the locale.
  int64_t files_read = 0;                  // Parsed and used.
  std::vector<SkippedFile> files_skipped;  // Unreadable or malformed, with the reason.
  int64_t plural_forms_unavailable = 0;    // Plural pairs whose form index was out of range.
  int64_t duplicate_pairs = 0;             // (src, tgt) repeats dropped within a locale.
  int64_t capped_pairs = 0;                // Dropped by max_pairs_per_locale.
  int64_t long_pairs = 0;                  // Dropped by max_source_words.
  int64_t placeholder_pairs = 0;           // Dropped by drop_placeholders.
  CleanupStats cleanup;
};

/// Builds the corpus: writes <out_dir>/<split>.<locale>.tsv (lines "en<TAB>locale<TAB>src<TAB>
/// tgt", in catalogue path order, then entry order) and <out_dir>/summary.json, after removing
/// TSV files of that naming left in out_dir by an earlier build. Bad catalogues are skipped and
/// listed in the summary; errors are only for invalid options or failed output. Blocks; the
/// output is byte-identical for identical input. Not safe to run twice on one out_dir at once.
[[nodiscard]] absl::StatusOr<L10nCorpusSummary> BuildL10nCorpus(const L10nCorpusOptions& options);

/// The summary as written to summary.json (pretty-printed JSON).
std::string L10nSummaryToJson(const L10nCorpusSummary& summary, const L10nCorpusOptions& options);

}  // namespace deepnet::data
