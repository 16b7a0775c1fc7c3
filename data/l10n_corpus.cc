#include "data/l10n_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/mo_catalog.h"
#include "data/splitmix64.h"
#include "storage/atomic_file.h"

namespace deepnet::data {
namespace {

namespace fs = std::filesystem;

constexpr CorpusSplit kSplits[] = {CorpusSplit::kTrain, CorpusSplit::kValid, CorpusSplit::kTest};

// Appends the */LC_MESSAGES/*.mo files under `root`, sorted by path, to *files.
void FindCatalogues(const std::string& root, std::vector<std::string>* files,
                    L10nCorpusSummary* summary) {
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    summary->roots_missing.push_back(root);
    return;
  }
  std::vector<std::string> found;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    summary->files_skipped.push_back({root, absl::StrCat("cannot list: ", ec.message())});
    return;
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      summary->files_skipped.push_back({root, absl::StrCat("listing stopped: ", ec.message())});
      break;
    }
    const fs::path& path = it->path();
    if (path.extension() != ".mo" || path.parent_path().filename() != "LC_MESSAGES") continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) continue;
    found.push_back(path.string());
  }
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
}

// The message's reason without the leading "path: " that ParseMo/ReadMoBytes put there.
std::string ReasonOf(const absl::Status& status, const std::string& path) {
  std::string_view message(status.message().data(), status.message().size());
  const std::string prefix = path + ": ";
  if (message.substr(0, prefix.size()) == prefix) message.remove_prefix(prefix.size());
  return std::string(message);
}

// Cleans every translated message of `catalog` into *pairs, dropping repeats.
void CollectPairs(const MoCatalog& catalog, PairDeduper* deduper, std::vector<TextPair>* pairs,
                  L10nCorpusSummary* summary) {
  std::vector<TextPair> cleaned;
  auto add = [&](const std::string& src, const std::string& tgt) {
    if (tgt.empty()) return;  // Untranslated.
    cleaned.clear();
    CleanMessagePair(src, tgt, &cleaned, &summary->cleanup);
    for (TextPair& pair : cleaned) {
      if (deduper->Insert(pair.first, pair.second)) {
        pairs->push_back(std::move(pair));
      } else {
        ++summary->duplicate_pairs;
      }
    }
  };
  for (const MoMessage& message : catalog.messages) {
    if (!message.is_plural()) {
      add(message.msgid, message.msgstr.front());
      continue;
    }
    // DATA.md: the singular pairs with the form for n=1, the plural with the form for n=5.
    for (const auto& [n, source] :
         {std::pair<uint64_t, const std::string*>{1, &message.msgid}, {5, &message.msgid_plural}}) {
      const absl::StatusOr<int> index = catalog.plural_rule.FormIndex(n);
      if (!index.ok() || static_cast<size_t>(*index) >= message.msgstr.size()) {
        ++summary->plural_forms_unavailable;
        continue;
      }
      add(*source, message.msgstr[static_cast<size_t>(*index)]);
    }
  }
}

int64_t WordCount(std::string_view s) {
  int64_t words = 0;
  bool in_word = false;
  for (const char c : s) {
    const bool space = c == ' ';  // CollapseWhitespace left single spaces only.
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// Drops the pairs options.max_source_words and options.drop_placeholders leave out, keeping the
// order of the rest, and counts them in `summary`.
void FilterPairs(const L10nCorpusOptions& options, std::vector<TextPair>* pairs,
                 L10nCorpusSummary* summary) {
  if (options.max_source_words <= 0 && !options.drop_placeholders) return;
  std::vector<TextPair> kept;
  kept.reserve(pairs->size());
  for (TextPair& pair : *pairs) {
    if (options.max_source_words > 0 && WordCount(pair.first) > options.max_source_words) {
      ++summary->long_pairs;
    } else if (options.drop_placeholders && HasPlaceholder(pair.first)) {
      ++summary->placeholder_pairs;
    } else {
      kept.push_back(std::move(pair));
    }
  }
  *pairs = std::move(kept);
}

// Keeps the `cap` pairs with the smallest hashes, in their original order.
int64_t CapPairs(int64_t cap, std::vector<TextPair>* pairs) {
  if (cap <= 0 || static_cast<int64_t>(pairs->size()) <= cap) return 0;
  std::vector<std::pair<uint64_t, size_t>> keyed;  // (hash, index)
  keyed.reserve(pairs->size());
  for (size_t i = 0; i < pairs->size(); ++i) {
    const TextPair& pair = (*pairs)[i];
    keyed.emplace_back(SplitMix64::Finalize(Fnv1a64(pair.first + '\0' + pair.second)), i);
  }
  std::nth_element(keyed.begin(), keyed.begin() + cap, keyed.end());
  std::vector<size_t> kept;
  for (int64_t i = 0; i < cap; ++i) kept.push_back(keyed[static_cast<size_t>(i)].second);
  std::sort(kept.begin(), kept.end());
  std::vector<TextPair> out;
  out.reserve(kept.size());
  for (size_t index : kept) out.push_back(std::move((*pairs)[index]));
  const int64_t dropped = static_cast<int64_t>(pairs->size()) - cap;
  *pairs = std::move(out);
  return dropped;
}

std::string TsvPath(const std::string& out_dir, CorpusSplit split, const std::string& locale) {
  return (fs::path(out_dir) / absl::StrCat(CorpusSplitName(split), ".", locale, ".tsv")).string();
}

// Removes <split>.<locale>.tsv files of an earlier build, so out_dir matches this summary.
absl::Status RemoveStaleOutputs(const std::string& out_dir) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (CorpusSplit split : kSplits) {
      const std::string prefix = absl::StrCat(CorpusSplitName(split), ".");
      if (name.size() <= prefix.size() + 4 || name.compare(0, prefix.size(), prefix) != 0 ||
          name.compare(name.size() - 4, 4, ".tsv") != 0) {
        continue;
      }
      const std::string locale = name.substr(prefix.size(), name.size() - prefix.size() - 4);
      if (NormalizeLocale(locale) != locale) continue;
      fs::remove(entry.path(), ec);
      if (ec) return absl::InternalError(absl::StrCat(entry.path().string(), ": ", ec.message()));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat(out_dir, ": cannot list: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DefaultL10nRoots() { return {"/usr/share/locale", "data/l10n/extracted"}; }

std::vector<std::string> DefaultExcludedL10nDomains() {
  return {"iso_15924",  "iso_3166",  "iso_3166-1", "iso_3166-2",       "iso_3166-3",
          "iso_3166_2", "iso_4217",  "iso_639",    "iso_639-2",        "iso_639-3",
          "iso_639-5",  "iso_639_3", "iso_639_5",  "kunitconversion5", "libgweather-4.0-locations"};
}

absl::Status Validate(const L10nCorpusOptions& options) {
  if (options.out_dir.empty()) return absl::InvalidArgumentError("out_dir is required");
  if (options.max_source_words < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_source_words must be >= 0 (0 = no limit), got ", options.max_source_words));
  }
  if (options.min_pairs < 0 || options.max_pairs_per_locale < 0) {
    return absl::InvalidArgumentError("min_pairs and max_pairs_per_locale must be >= 0");
  }
  const double v = options.valid_fraction;
  const double t = options.test_fraction;
  if (!(v >= 0 && v <= 1) || !(t >= 0 && t <= 1) || !(v + t <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("valid_fraction ", v, " and test_fraction ", t,
                                                   " must be in [0, 1] with a sum <= 1"));
  }
  for (const std::string& locale : options.locales) {
    if (NormalizeLocale(locale) != locale) {
      return absl::InvalidArgumentError(absl::StrCat(
          "locale \"", locale, "\" is not a corpus locale (expected e.g. de, pt_BR, sr@latin; ",
          "English is never one)"));
    }
  }
  return absl::OkStatus();
}

const char* CorpusSplitName(CorpusSplit split) {
  switch (split) {
    case CorpusSplit::kTrain:
      return "train";
    case CorpusSplit::kValid:
      return "valid";
    case CorpusSplit::kTest:
      return "test";
  }
  return "train";
}

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

CorpusSplit SplitForSource(std::string_view english, double valid_fraction, double test_fraction) {
  // FNV-1a's top bits mix the last bytes weakly; the SplitMix64 finaliser fixes that.
  const uint64_t hash = SplitMix64::Finalize(Fnv1a64(english));
  const double u = static_cast<double>(hash >> 11) * 0x1.0p-53;
  if (u < valid_fraction) return CorpusSplit::kValid;
  if (u < valid_fraction + test_fraction) return CorpusSplit::kTest;
  return CorpusSplit::kTrain;
}

absl::StatusOr<L10nCorpusSummary> BuildL10nCorpus(const L10nCorpusOptions& options) {
  if (absl::Status status = Validate(options); !status.ok()) return status;
  L10nCorpusSummary summary;
  summary.roots = options.roots.empty() ? DefaultL10nRoots() : options.roots;
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(options.out_dir, ": ", ec.message()));
  if (absl::Status status = RemoveStaleOutputs(options.out_dir); !status.ok()) return status;

  std::vector<std::string> paths;
  for (const std::string& root : summary.roots) FindCatalogues(root, &paths, &summary);
  summary.files_found = static_cast<int64_t>(paths.size());
  const std::set<std::string> wanted(options.locales.begin(), options.locales.end());
  const std::set<std::string> excluded(options.exclude_domains.begin(),
                                       options.exclude_domains.end());
  std::map<std::string, std::vector<std::string>> by_locale;  // Sorted, so output is stable.
  for (const std::string& path : paths) {
    if (excluded.count(fs::path(path).stem().string()) > 0) {
      ++summary.files_excluded_domain;
      continue;
    }
    const std::string folder = fs::path(path).parent_path().parent_path().filename().string();
    const std::optional<std::string> locale = NormalizeLocale(folder);
    if (!locale.has_value() || (!wanted.empty() && wanted.count(*locale) == 0)) {
      ++summary.files_out_of_scope;
      continue;
    }
    by_locale[*locale].push_back(path);
  }

  std::unordered_set<std::string> english;
  std::set<std::pair<std::string, uint64_t>> seen_files;  // (locale, FNV-1a 64 of the bytes)
  PairDeduper deduper;
  for (const auto& [locale, files] : by_locale) {
    L10nLocaleSummary stats;
    stats.locale = locale;
    std::vector<TextPair> pairs;
    deduper.Clear();
    for (const std::string& path : files) {
      absl::StatusOr<std::string> bytes = ReadMoBytes(path);
      if (!bytes.ok()) {
        summary.files_skipped.push_back({path, ReasonOf(bytes.status(), path)});
        continue;
      }
      const uint64_t hash = Fnv1a64(*bytes);
      const bool inserted = seen_files.emplace(locale, hash).second;
      if (!inserted) {
        ++summary.files_duplicate;  // E.g. installed and also extracted, or no/ next to nb/.
        continue;
      }
      absl::StatusOr<MoCatalog> catalog = ParseMo(*bytes, path);
      if (!catalog.ok()) {
        summary.files_skipped.push_back({path, ReasonOf(catalog.status(), path)});
        continue;
      }
      ++summary.files_read;
      ++stats.files;
      CollectPairs(*catalog, &deduper, &pairs, &summary);
    }
    if (pairs.empty() || static_cast<int64_t>(pairs.size()) < options.min_pairs) {
      stats.train = static_cast<int64_t>(pairs.size());  // Unsplit count, for the report.
      summary.locales_below_min.push_back(stats);
      continue;
    }
    FilterPairs(options, &pairs, &summary);
    summary.capped_pairs += CapPairs(options.max_pairs_per_locale, &pairs);
    std::string text[3];  // [CorpusSplit]
    for (const TextPair& pair : pairs) {
      const CorpusSplit split =
          SplitForSource(pair.first, options.valid_fraction, options.test_fraction);
      absl::StrAppend(&text[static_cast<int>(split)], "en\t", locale, "\t", pair.first, "\t",
                      pair.second, "\n");
      int64_t* count = split == CorpusSplit::kTrain   ? &stats.train
                       : split == CorpusSplit::kValid ? &stats.valid
                                                      : &stats.test;
      ++*count;
      english.insert(pair.first);
    }
    for (CorpusSplit split : kSplits) {
      absl::Status status = storage::WriteFileAtomically(TsvPath(options.out_dir, split, locale),
                                                         text[static_cast<int>(split)]);
      if (!status.ok()) return status;
    }
    summary.total_pairs += stats.total();
    summary.locales.push_back(std::move(stats));
  }
  summary.unique_english = static_cast<int64_t>(english.size());
  absl::Status status = storage::WriteFileAtomically(
      (fs::path(options.out_dir) / "summary.json").string(), L10nSummaryToJson(summary, options));
  if (!status.ok()) return status;
  return summary;
}

std::string L10nSummaryToJson(const L10nCorpusSummary& summary, const L10nCorpusOptions& options) {
  using nlohmann::ordered_json;
  ordered_json json;
  json["roots"] = summary.roots;
  json["roots_missing"] = summary.roots_missing;
  json["options"] = {{"locales", options.locales},
                     {"min_pairs", options.min_pairs},
                     {"max_pairs_per_locale", options.max_pairs_per_locale},
                     {"max_source_words", options.max_source_words},
                     {"drop_placeholders", options.drop_placeholders},
                     {"valid_fraction", options.valid_fraction},
                     {"test_fraction", options.test_fraction}};
  json["total_pairs"] = summary.total_pairs;
  json["unique_english"] = summary.unique_english;
  ordered_json splits = {{"train", 0}, {"valid", 0}, {"test", 0}};
  ordered_json locales = ordered_json::object();
  for (const L10nLocaleSummary& locale : summary.locales) {
    locales[locale.locale] = {{"files", locale.files},
                              {"train", locale.train},
                              {"valid", locale.valid},
                              {"test", locale.test},
                              {"total", locale.total()}};
    splits["train"] = splits["train"].get<int64_t>() + locale.train;
    splits["valid"] = splits["valid"].get<int64_t>() + locale.valid;
    splits["test"] = splits["test"].get<int64_t>() + locale.test;
  }
  json["pairs_per_split"] = splits;
  json["locales"] = locales;
  ordered_json below = ordered_json::object();
  for (const L10nLocaleSummary& locale : summary.locales_below_min) {
    below[locale.locale] = locale.total();
  }
  json["locales_below_min_pairs"] = below;
  json["files_found"] = summary.files_found;
  json["files_read"] = summary.files_read;
  json["files_out_of_scope"] = summary.files_out_of_scope;
  json["files_excluded_domain"] = summary.files_excluded_domain;
  json["files_duplicate"] = summary.files_duplicate;
  ordered_json skipped = ordered_json::array();
  for (const SkippedFile& file : summary.files_skipped) {
    skipped.push_back({{"path", file.path}, {"reason", file.reason}});
  }
  json["files_skipped"] = skipped;
  const CleanupStats& c = summary.cleanup;
  json["cleanup"] = {{"messages", c.messages},
                     {"split_messages", c.split_messages},
                     {"dropped_empty", c.dropped_empty},
                     {"dropped_format_only", c.dropped_format_only},
                     {"dropped_identical", c.dropped_identical},
                     {"dropped_duplicate", summary.duplicate_pairs},
                     {"dropped_over_cap", summary.capped_pairs},
                     {"dropped_long", summary.long_pairs},
                     {"dropped_placeholder", summary.placeholder_pairs},
                     {"plural_forms_unavailable", summary.plural_forms_unavailable},
                     {"kept_before_dedupe", c.kept}};
  // Paths need not be UTF-8; replace what is not rather than throw.
  return json.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace deepnet::data
