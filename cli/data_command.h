#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace deepnet::cli {

/// `deepnet data build-corpus`: the gettext English->X corpus of docs/DATA.md.
struct BuildCorpusCommand {
  // Folders searched for */LC_MESSAGES/*.mo; empty means /usr/share/locale and
  // data/l10n/extracted (data::DefaultL10nRoots()).
  std::vector<std::string> roots;
  // Where <split>.<locale>.tsv and summary.json go; created when missing.
  std::string out_dir = "data/l10n/corpus";
  // Locale codes to build ("de", "pt_BR", "sr@latin"); empty means all.
  std::vector<std::string> locales;
  // Locales with fewer pairs are left out; 0 keeps all.
  int64_t min_pairs = 0;
  // Pairs kept per locale (a stable sample); 0 means no cap.
  int64_t max_pairs_per_locale = 0;
  int64_t max_source_words = 0;
  bool drop_placeholders = false;
  // Fractions of English sentences held out for valid and test.
  double valid_fraction = 0.01;
  double test_fraction = 0.01;
};

/// `deepnet data fetch-l10n`: runs scripts/fetch_l10n.sh.
struct FetchL10nCommand {
  // The script to run with bash; relative paths are from the working directory.
  std::string script = "scripts/fetch_l10n.sh";
  // Passed as the script's argument; empty lets the script use <repo>/data/l10n.
  std::string l10n_dir;
};

/// Builds the corpus and prints a table (pairs per locale and split), the totals, the unique
/// English sentences, the files read and skipped (with reasons), the time and pairs/s to `out`.
/// Returns kExitOk, kExitBadInput for invalid options, or kExitFailure when output cannot be
/// written (message on `err`). Blocks for the whole build.
int RunBuildCorpus(const BuildCorpusCommand& command, std::ostream& out, std::ostream& err);

/// Runs the fetch script with bash, forwarding its stdout to `out` and stderr to `err` as they
/// arrive. Returns kExitOk when it succeeds, kExitBadInput when the script does not exist, and
/// kExitFailure when it cannot be started or exits non-zero. Blocks until the script ends.
int RunFetchL10n(const FetchL10nCommand& command, std::ostream& out, std::ostream& err);

}  // namespace deepnet::cli
