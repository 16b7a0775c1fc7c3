#include "data/l10n_corpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "data/parallel_corpus.h"
#include "tests/data/mo_test_writer.h"

namespace deepnet::data {
namespace {

using namespace std::string_literals;

using mo_test::MoEntry;
using mo_test::MoHeader;
using mo_test::WriteMo;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class L10nCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "deepnet_l10n_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    root_ = dir_ / "root";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void AddCatalogue(const std::string& locale, const std::string& domain,
                    const std::string& bytes) {
    const fs::path folder = root_ / locale / "LC_MESSAGES";
    fs::create_directories(folder);
    mo_test::WriteBytes((folder / (domain + ".mo")).string(), bytes);
  }

  // A small tree exercising every rule: see the expectations in BuildsExpectedPairs.
  void AddSampleTree() {
    AddCatalogue("de_DE", "app",
                 WriteMo({{"", MoHeader("UTF-8", "nplurals=2; plural=(n != 1);")},
                          {"_Open", "Ö_ffnen"},
                          {"%s", "%s"},
                          {"Hello", "Hello"},
                          {"Untranslated", ""},
                          {"menu\x04Quit", "Beenden"},
                          {"%d file\0%d files"s, "%d Datei\0%d Dateien"s},
                          {"Name:\nSize:", "Name:\nGröße:"}}));
    AddCatalogue("de", "other", WriteMo({{"Open", "Öffnen"}, {"Close", "Schließen"}}));
    AddCatalogue("en_GB", "app", WriteMo({{"Color", "Colour"}}));
    AddCatalogue("fr", "app", WriteMo({{"Open", "Ouvrir"}, {"Close", "Fermer"}}));
    AddCatalogue("fr", "broken", "this is not a catalogue, just some text");
    AddCatalogue("ja", "iso_639-3", WriteMo({{"German", "ドイツ語"}}));
    AddCatalogue("ko", "app", WriteMo({{"OK", "OK"}}));  // No pair survives: not written.
    AddCatalogue("nb", "app", WriteMo({{"Open", "Åpne"}}));
    AddCatalogue("no", "app", WriteMo({{"Open", "Åpne"}}));  // Same bytes: a duplicate.
  }

  L10nCorpusOptions Options(const std::string& out = "out") const {
    L10nCorpusOptions options;
    options.roots = {root_.string()};
    options.out_dir = (dir_ / out).string();
    options.valid_fraction = 0;
    options.test_fraction = 0;
    return options;
  }

  fs::path dir_;
  fs::path root_;
};

TEST_F(L10nCorpusTest, BuildsExpectedPairsAndSummary) {
  AddSampleTree();
  const L10nCorpusOptions options = Options();
  absl::StatusOr<L10nCorpusSummary> summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();

  // de: files in path order (de/other.mo, then de_DE/app.mo); "Open"->"Öffnen" only once.
  EXPECT_EQ(ReadAll(dir_ / "out" / "train.de.tsv"),
            "en\tde\tOpen\tÖffnen\n"
            "en\tde\tClose\tSchließen\n"
            "en\tde\tQuit\tBeenden\n"
            "en\tde\t%d file\t%d Datei\n"
            "en\tde\t%d files\t%d Dateien\n"
            "en\tde\tSize:\tGröße:\n");
  EXPECT_EQ(ReadAll(dir_ / "out" / "train.fr.tsv"),
            "en\tfr\tOpen\tOuvrir\nen\tfr\tClose\tFermer\n");
  EXPECT_EQ(ReadAll(dir_ / "out" / "train.nb.tsv"), "en\tnb\tOpen\tÅpne\n");
  EXPECT_EQ(ReadAll(dir_ / "out" / "valid.de.tsv"), "");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.en.tsv"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.ja.tsv"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.ko.tsv"));
  ASSERT_EQ(summary->locales_below_min.size(), 1u);
  EXPECT_EQ(summary->locales_below_min[0].locale, "ko");

  ASSERT_EQ(summary->locales.size(), 3u);
  EXPECT_EQ(summary->locales[0].locale, "de");
  EXPECT_EQ(summary->locales[0].files, 2);
  EXPECT_EQ(summary->locales[0].train, 6);
  EXPECT_EQ(summary->total_pairs, 9);
  EXPECT_EQ(summary->unique_english, 6);  // Open Close Quit "%d file" "%d files" Size:
  EXPECT_EQ(summary->files_found, 9);
  EXPECT_EQ(summary->files_read, 5);
  EXPECT_EQ(summary->files_out_of_scope, 1);     // en_GB
  EXPECT_EQ(summary->files_excluded_domain, 1);  // iso_639-3
  EXPECT_EQ(summary->files_duplicate, 1);        // no/app.mo == nb/app.mo
  ASSERT_EQ(summary->files_skipped.size(), 1u);
  EXPECT_THAT(summary->files_skipped[0].path, HasSubstr("fr/LC_MESSAGES/broken.mo"));
  EXPECT_THAT(summary->files_skipped[0].reason, HasSubstr("bad magic"));
  EXPECT_EQ(summary->duplicate_pairs, 1);
  EXPECT_EQ(summary->cleanup.dropped_format_only, 1);
  EXPECT_EQ(summary->cleanup.dropped_identical, 3);  // Hello, the split-off "Name:", OK.

  // The TSV files are what ReadTsvCorpus reads.
  absl::StatusOr<std::vector<ParallelExample>> read =
      ReadTsvCorpus((dir_ / "out" / "train.fr.tsv").string(), "", "");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].src_lang, "en");
  EXPECT_EQ((*read)[0].tgt_lang, "fr");
  EXPECT_EQ((*read)[0].tgt, "Ouvrir");

  const nlohmann::json json = nlohmann::json::parse(ReadAll(dir_ / "out" / "summary.json"));
  EXPECT_EQ(json["total_pairs"], 9);
  EXPECT_EQ(json["unique_english"], 6);
  EXPECT_EQ(json["locales"]["de"]["train"], 6);
  EXPECT_EQ(json["locales"]["fr"]["total"], 2);
  EXPECT_EQ(json["files_read"], 5);
  EXPECT_EQ(json["files_skipped"][0]["reason"], summary->files_skipped[0].reason);
  EXPECT_EQ(json["pairs_per_split"]["train"], 9);
}

TEST_F(L10nCorpusTest, SplitsByEnglishSourceSoNoSentenceIsInTwoSplits) {
  // 600 English sentences, each translated in two locales, with some repeated per locale.
  std::vector<MoEntry> de;
  std::vector<MoEntry> fr;
  for (int i = 0; i < 600; ++i) {
    const std::string english = "Sentence number " + std::to_string(i);
    de.push_back({english, "Satz Nummer " + std::to_string(i)});
    fr.push_back({english, "Phrase numéro " + std::to_string(i)});
    if (i % 7 == 0) de.push_back({english + " (ctx)", "Satz " + std::to_string(i) + " (ctx)"});
  }
  AddCatalogue("de", "a", WriteMo(de));
  AddCatalogue("fr", "a", WriteMo(fr));
  L10nCorpusOptions options = Options();
  options.valid_fraction = 0.1;
  options.test_fraction = 0.2;
  absl::StatusOr<L10nCorpusSummary> summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();

  std::map<std::string, std::set<std::string>> split_of;  // English -> splits it is in.
  std::map<std::string, int> sizes;
  for (const char* split : {"train", "valid", "test"}) {
    for (const char* locale : {"de", "fr"}) {
      const std::string path = (dir_ / "out" / (std::string(split) + "." + locale + ".tsv"));
      absl::StatusOr<std::vector<ParallelExample>> examples = ReadTsvCorpus(path, "", "");
      ASSERT_TRUE(examples.ok()) << examples.status();
      for (const ParallelExample& example : *examples) split_of[example.src].insert(split);
      sizes[split] += static_cast<int>(examples->size());
    }
  }
  for (const auto& [english, splits] : split_of) {
    EXPECT_EQ(splits.size(), 1u) << english << " is in more than one split";
    EXPECT_EQ(SplitForSource(english, 0.1, 0.2) == CorpusSplit::kValid, splits.count("valid") > 0);
  }
  EXPECT_EQ(split_of.size(), 686u);
  EXPECT_EQ(summary->unique_english, 686);
  // The hash spreads sentences close to the requested fractions (expected 10% and 20%).
  const double total = sizes["train"] + sizes["valid"] + sizes["test"];
  EXPECT_NEAR(sizes["valid"] / total, 0.1, 0.04);
  EXPECT_NEAR(sizes["test"] / total, 0.2, 0.05);
  EXPECT_EQ(summary->locales[0].valid + summary->locales[1].valid, sizes["valid"]);
}

TEST_F(L10nCorpusTest, SplitForSourceIsAFixedFunctionOfTheBytes) {
  // Pinned values: a change here reshuffles every corpus built so far.
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(SplitForSource("anything", 1.0, 0.0), CorpusSplit::kValid);
  EXPECT_EQ(SplitForSource("anything", 0.0, 1.0), CorpusSplit::kTest);
  EXPECT_EQ(SplitForSource("anything", 0.0, 0.0), CorpusSplit::kTrain);
}

TEST_F(L10nCorpusTest, OutputIsIdenticalAcrossRuns) {
  AddSampleTree();
  L10nCorpusOptions first = Options("a");
  L10nCorpusOptions second = Options("b");
  first.valid_fraction = second.valid_fraction = 0.3;
  first.test_fraction = second.test_fraction = 0.3;
  ASSERT_TRUE(BuildL10nCorpus(first).ok());
  ASSERT_TRUE(BuildL10nCorpus(second).ok());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "a")) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(ReadAll(entry.path()), ReadAll(dir_ / "b" / name)) << name;
    ++files;
  }
  EXPECT_EQ(files, 10);  // 3 locales x 3 splits, and summary.json.
}

TEST_F(L10nCorpusTest, AppliesLocaleFilterMinAndMaxPairs) {
  AddSampleTree();
  L10nCorpusOptions options = Options();
  options.locales = {"de", "fr"};
  options.min_pairs = 3;             // fr has 2 pairs.
  options.max_pairs_per_locale = 4;  // de has 6.
  absl::StatusOr<L10nCorpusSummary> summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->locales.size(), 1u);
  EXPECT_EQ(summary->locales[0].locale, "de");
  EXPECT_EQ(summary->locales[0].total(), 4);
  EXPECT_EQ(summary->capped_pairs, 2);
  ASSERT_EQ(summary->locales_below_min.size(), 1u);
  EXPECT_EQ(summary->locales_below_min[0].locale, "fr");
  EXPECT_EQ(summary->locales_below_min[0].total(), 2);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.fr.tsv"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.nb.tsv"));
  EXPECT_EQ(summary->files_out_of_scope, 4);  // en_GB, ko, nb, no.
}

TEST_F(L10nCorpusTest, LeavesOutLongAndPlaceholderSourcesWhenAsked) {
  AddCatalogue("de", "app",
               WriteMo({{"", MoHeader("UTF-8", "nplurals=2; plural=(n != 1);")},
                        {"Open", "Öffnen"},
                        {"Save the document", "Dokument speichern"},
                        {"Delete all selected files now", "Alle gewählten Dateien jetzt löschen"},
                        {"Open %s", "%s öffnen"},
                        {"<b>Bold</b> text", "<b>Fetter</b> Text"},
                        {"{0} files", "{0} Dateien"},
                        {"Tom &amp; Jerry", "Tom &amp; Jerry zwei"},
                        {"Print", "Drucken"}}));
  L10nCorpusOptions options = Options();
  options.valid_fraction = 0.0;
  options.test_fraction = 0.0;
  options.max_source_words = 3;
  options.drop_placeholders = true;
  absl::StatusOr<L10nCorpusSummary> summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(ReadAll(dir_ / "out" / "train.de.tsv"),
            "en\tde\tOpen\tÖffnen\nen\tde\tSave the document\tDokument speichern\n"
            "en\tde\tPrint\tDrucken\n");
  EXPECT_EQ(summary->long_pairs, 1);         // six words
  EXPECT_EQ(summary->placeholder_pairs, 4);  // %s, <b>, {0}, &amp;
  const nlohmann::json json = nlohmann::json::parse(ReadAll(dir_ / "out" / "summary.json"));
  EXPECT_EQ(json["options"]["max_source_words"], 3);
  EXPECT_EQ(json["cleanup"]["dropped_placeholder"], 4);

  options.max_source_words = 0;  // Both off: everything stays.
  options.drop_placeholders = false;
  summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->total_pairs, 8);
  EXPECT_EQ(summary->long_pairs + summary->placeholder_pairs, 0);
  options.max_source_words = -1;
  EXPECT_THAT(std::string(Validate(options).message()), HasSubstr("max_source_words"));
}

TEST_F(L10nCorpusTest, RemovesStaleOutputsAndReportsMissingRoots) {
  AddSampleTree();
  fs::create_directories(dir_ / "out");
  mo_test::WriteBytes((dir_ / "out" / "train.xx.tsv").string(), "old\n");
  mo_test::WriteBytes((dir_ / "out" / "notes.txt").string(), "mine\n");
  L10nCorpusOptions options = Options();
  options.roots.push_back((dir_ / "nowhere").string());
  absl::StatusOr<L10nCorpusSummary> summary = BuildL10nCorpus(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(fs::exists(dir_ / "out" / "train.xx.tsv"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "notes.txt"));
  EXPECT_THAT(summary->roots_missing, ElementsAre((dir_ / "nowhere").string()));
}

TEST_F(L10nCorpusTest, ValidateRejectsBadOptions) {
  L10nCorpusOptions options = Options();
  EXPECT_TRUE(Validate(options).ok());
  options.valid_fraction = 0.6;
  options.test_fraction = 0.6;
  EXPECT_THAT(std::string(Validate(options).message()), HasSubstr("sum <= 1"));
  options = Options();
  options.locales = {"de_DE"};  // Not normalised.
  EXPECT_THAT(std::string(Validate(options).message()), HasSubstr("\"de_DE\""));
  options = Options();
  options.out_dir.clear();
  EXPECT_FALSE(Validate(options).ok());
  EXPECT_FALSE(BuildL10nCorpus(options).ok());
  options = Options();
  options.max_pairs_per_locale = -1;
  EXPECT_FALSE(Validate(options).ok());
  EXPECT_THAT(DefaultL10nRoots(), UnorderedElementsAre("/usr/share/locale", "data/l10n/extracted"));
}

}  // namespace
}  // namespace deepnet::data
