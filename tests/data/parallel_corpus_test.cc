#include "data/parallel_corpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "data/byte_tokenizer.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ParallelCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet_corpus_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Writes `contents` byte for byte and returns the path.
  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out << contents;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(ParallelCorpusTest, ReadsTwoColumnLinesWithGivenLanguages) {
  const std::string path = WriteFile("a.tsv", "hello\thallo\ngood day\tguten Tag\n");
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->size(), 2u);
  EXPECT_EQ((*corpus)[0].src_lang, "en");
  EXPECT_EQ((*corpus)[0].tgt_lang, "de");
  EXPECT_EQ((*corpus)[0].src, "hello");
  EXPECT_EQ((*corpus)[0].tgt, "hallo");
  EXPECT_EQ((*corpus)[1].src, "good day");
  EXPECT_EQ((*corpus)[1].tgt, "guten Tag");
}

TEST_F(ParallelCorpusTest, ReadsFourColumnLinesWithTheirOwnLanguages) {
  const std::string path = WriteFile("b.tsv", "en\tfr\tcat\tchat\nde\ten\tHund\tdog\nx\ty\n");
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->size(), 3u);
  EXPECT_EQ((*corpus)[0].src_lang, "en");
  EXPECT_EQ((*corpus)[0].tgt_lang, "fr");
  EXPECT_EQ((*corpus)[0].tgt, "chat");
  EXPECT_EQ((*corpus)[1].src_lang, "de");
  EXPECT_EQ((*corpus)[1].src, "Hund");
  // A 2-column line in the same file takes the languages from the arguments.
  EXPECT_EQ((*corpus)[2].src_lang, "en");
  EXPECT_EQ((*corpus)[2].tgt_lang, "de");
}

TEST_F(ParallelCorpusTest, HandlesCrlfBomEmptyLinesAndMissingFinalNewline) {
  const std::string path =
      WriteFile("c.tsv", "\xEF\xBB\xBFone\teins\r\n\r\n\ntwo\tzwei\r\nthree\tdrei");
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->size(), 3u);
  EXPECT_EQ((*corpus)[0].src, "one");
  EXPECT_EQ((*corpus)[1].tgt, "zwei");
  EXPECT_EQ((*corpus)[2].src, "three");
  EXPECT_EQ((*corpus)[2].tgt, "drei");
}

TEST_F(ParallelCorpusTest, EmptyFileGivesEmptyCorpus) {
  const auto corpus = ReadTsvCorpus(WriteFile("empty.tsv", ""), "en", "de");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_THAT(*corpus, IsEmpty());
}

TEST_F(ParallelCorpusTest, WrongFieldCountNamesPathAndLine) {
  const std::string path = WriteFile("bad.tsv", "a\tb\n\njust one field\n");
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corpus.status().message(), HasSubstr(path + ":3:"));
  EXPECT_THAT(corpus.status().message(), HasSubstr("expected 2 or 4 tab-separated fields, got 1"));

  const auto three = ReadTsvCorpus(WriteFile("three.tsv", "a\tb\tc\r\n"), "en", "de");
  ASSERT_FALSE(three.ok());
  EXPECT_THAT(three.status().message(), HasSubstr("three.tsv:1: expected 2 or 4"));
  EXPECT_THAT(three.status().message(), HasSubstr("got 3"));
}

TEST_F(ParallelCorpusTest, EmptySideNamesPathLineAndSide) {
  const std::string path = WriteFile("side.tsv", "ok\tfine\nsource only\t\n");
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corpus.status().message(), HasSubstr(path + ":2: empty target sentence"));

  const auto src = ReadTsvCorpus(WriteFile("src.tsv", "en\tde\t\tx\n"), "en", "de");
  ASSERT_FALSE(src.ok());
  EXPECT_THAT(src.status().message(), HasSubstr("src.tsv:1: empty source sentence"));

  const auto lang = ReadTsvCorpus(WriteFile("lang.tsv", "en\t\ta\tb\n"), "en", "de");
  ASSERT_FALSE(lang.ok());
  EXPECT_THAT(lang.status().message(), HasSubstr("lang.tsv:1: empty target language"));
}

TEST_F(ParallelCorpusTest, TwoColumnLineWithoutLanguagesIsAnError) {
  const std::string path = WriteFile("nolang.tsv", "en\tde\ta\tb\nx\ty\n");
  const auto corpus = ReadTsvCorpus(path, "", "");
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(), HasSubstr(path + ":2: 2-column line"));
}

TEST_F(ParallelCorpusTest, MissingFileIsNotFoundAndNamesPath) {
  const std::string path = (dir_ / "missing.tsv").string();
  const auto corpus = ReadTsvCorpus(path, "en", "de");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(corpus.status().message(), HasSubstr(path));
}

TEST_F(ParallelCorpusTest, DirectoryIsAnErrorNamingPath) {
  const auto corpus = ReadTsvCorpus(dir_.string(), "en", "de");
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(), HasSubstr(dir_.string()));
}

TEST(TokenizeCorpusTest, PutsTargetTagFirstAndEosLast) {
  const ByteTokenizer tokenizer({"de", "fr"});
  const std::vector<ParallelExample> examples = {{"en", "fr", "ab", "c"}};
  int64_t dropped = -1;
  const auto tokenized = TokenizeCorpus(examples, tokenizer, 0, &dropped);
  ASSERT_EQ(tokenized.size(), 1u);
  const int32_t a = tokenizer.Encode("a")[0];
  const int32_t b = tokenizer.Encode("b")[0];
  const int32_t c = tokenizer.Encode("c")[0];
  EXPECT_THAT(tokenized[0].src, ElementsAre(5, a, b, tokenizer.eos_id()));
  EXPECT_THAT(tokenized[0].tgt, ElementsAre(c, tokenizer.eos_id()));
  EXPECT_EQ(dropped, 0);
}

TEST(TokenizeCorpusTest, DropsAndCountsUnknownTargetLanguages) {
  const ByteTokenizer tokenizer({"de"});
  // Only the target language needs a tag; the source language may be anything.
  const std::vector<ParallelExample> examples = {
      {"en", "de", "one", "eins"}, {"en", "fr", "two", "deux"}, {"xx", "de", "3", "drei"}};
  int64_t dropped = -1;
  const auto tokenized = TokenizeCorpus(examples, tokenizer, 0, &dropped);
  ASSERT_EQ(tokenized.size(), 2u);
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(tokenizer.Decode(tokenized[1].tgt), "drei");
}

TEST(TokenizeCorpusTest, DropsExamplesOverMaxLenCountingTagAndEos) {
  const ByteTokenizer tokenizer({"de"});
  const std::vector<ParallelExample> examples = {
      {"en", "de", "abc", "wxyz"},  // src 5 tokens, tgt 5 tokens: kept at max_len 5.
      {"en", "de", "abcd", "w"},    // src 6 tokens: dropped.
      {"en", "de", "a", "vwxyz"}};  // tgt 6 tokens: dropped.
  int64_t dropped = -1;
  const auto tokenized = TokenizeCorpus(examples, tokenizer, 5, &dropped);
  ASSERT_EQ(tokenized.size(), 1u);
  EXPECT_EQ(tokenized[0].src.size(), 5u);
  EXPECT_EQ(tokenized[0].tgt.size(), 5u);
  EXPECT_EQ(dropped, 2);

  // max_len 0 keeps everything; a null counter is allowed.
  EXPECT_EQ(TokenizeCorpus(examples, tokenizer, 0, nullptr).size(), 3u);
}

}  // namespace
}  // namespace deepnet::data
