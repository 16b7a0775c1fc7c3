#include "data/shard_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/splitmix64.h"
#include "data/token_shard.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Word-by-word "translations": the same random word indices rendered in each language's list
// of 50 pseudo-words (2-7 random letters each).
std::vector<std::string> MakeWords(uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::string> words(50);
  for (std::string& word : words) {
    for (int n = 2 + static_cast<int>(rng.UniformBelow(6)); n > 0; --n) {
      word += static_cast<char>('a' + rng.UniformBelow(26));
    }
  }
  return words;
}

struct Lexicon {
  std::vector<std::string> en = MakeWords(100);
  std::vector<std::string> de = MakeWords(200);
  std::vector<std::string> fr = MakeWords(300);
};

std::string Render(const std::vector<std::string>& words, const std::vector<uint64_t>& indices) {
  std::string s;
  for (uint64_t i : indices) absl::StrAppend(&s, s.empty() ? "" : " ", words[i]);
  return s;
}

class ShardBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet_shards_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    std::filesystem::create_directories(dir_ / "in");
    WriteTsv("train", "de", 300, 1, /*add_long=*/true);
    WriteTsv("train", "fr", 40, 2, /*add_long=*/false);
    WriteTsv("valid", "de", 20, 3, /*add_long=*/false);
    WriteTsv("valid", "fr", 10, 4, /*add_long=*/false);
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // `<split>.<locale>.tsv` with `count` pairs; `add_long` appends one pair over max_len.
  void WriteTsv(const std::string& split, const std::string& locale, int count, uint64_t seed,
                bool add_long) {
    const Lexicon lex;
    const std::vector<std::string>& target = locale == "de" ? lex.de : lex.fr;
    SplitMix64 rng(seed);
    std::ofstream out(dir_ / "in" / absl::StrCat(split, ".", locale, ".tsv"), std::ios::binary);
    for (int i = 0; i < count + (add_long ? 1 : 0); ++i) {
      std::vector<uint64_t> indices(i == count ? 200 : 2 + rng.UniformBelow(5));
      for (uint64_t& index : indices) index = rng.UniformBelow(lex.en.size());
      const std::string en = Render(lex.en, indices);
      const std::string x = Render(target, indices);
      out << "en\t" << locale << "\t" << en << "\t" << x << "\n";
      if (split == "valid" && i == 0) first_valid_[locale] = {en, x};
    }
  }

  ShardBuildOptions Options() const {
    ShardBuildOptions options;
    options.input_dir = (dir_ / "in").string();
    options.output_dir = (dir_ / "out").string();
    options.splits = {"train", "valid"};
    options.vocab_size = 90;
    options.training_sentences = 4000;
    options.max_len = 64;              // Over 6 words of up to 7 letters even as single characters.
    options.character_coverage = 1.0;  // Decode must give back every letter (no unk).
    return options;
  }

  std::string ReadText(const std::filesystem::path& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_;
  std::map<std::string, std::pair<std::string, std::string>> first_valid_;  // [locale]
};

TEST_F(ShardBuilderTest, BuildsBothDirectionsThatReopenAgainstTheModel) {
  const absl::StatusOr<ShardSetSummary> summary = BuildShards(Options());
  ASSERT_TRUE(summary.ok()) << summary.status();
  auto tokenizer = SentencePieceTokenizer::Load((dir_ / "out" / "spm.model").string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const SentencePieceTokenizer& tok = **tokenizer;
  EXPECT_EQ(summary->vocab_size, 90);
  EXPECT_EQ(summary->fingerprint, tok.ModelFingerprint());
  EXPECT_THAT(summary->languages, ElementsAre("en", "de", "fr"));
  EXPECT_THAT(tok.Languages(), ElementsAre("en", "de", "fr"));
  EXPECT_EQ(summary->tokenized_sentences, 2 * 2 * (301 + 40 + 20 + 10));
  EXPECT_GT(summary->sentences_per_second, 0);

  std::vector<std::string> files;
  for (const ShardSummary& s : summary->shards) files.push_back(s.file);
  EXPECT_THAT(files, ElementsAre("train.en-de.bin", "train.de-en.bin", "train.en-fr.bin",
                                 "train.fr-en.bin", "valid.en-de.bin", "valid.de-en.bin",
                                 "valid.en-fr.bin", "valid.fr-en.bin"));
  for (const ShardSummary& s : summary->shards) {
    SCOPED_TRACE(s.file);
    absl::StatusOr<TokenShard> shard = TokenShard::Open((dir_ / "out" / s.file).string(),
                                                        tok.vocab_size(), tok.ModelFingerprint());
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->header().src_lang, s.src_lang);
    EXPECT_EQ(shard->header().tgt_lang, s.tgt_lang);
    EXPECT_EQ(static_cast<int64_t>(shard->size()), s.pairs);
    EXPECT_EQ(static_cast<int64_t>(shard->num_src_tokens()), s.src_tokens);
    EXPECT_EQ(static_cast<int64_t>(shard->num_tgt_tokens()), s.tgt_tokens);
    // The 200-word German training pair is over max_len in both directions.
    EXPECT_EQ(s.dropped, s.split == "train" && (s.src_lang == "de" || s.tgt_lang == "de") ? 1 : 0);
    const std::vector<int32_t> src = shard->src(0).ToVector();
    const std::vector<int32_t> tgt = shard->tgt(0).ToVector();
    ASSERT_GE(src.size(), 2u);
    EXPECT_EQ(src.front(), tok.LangTagId(s.tgt_lang));
    EXPECT_EQ(src.back(), tok.eos_id());
    EXPECT_EQ(tgt.back(), tok.eos_id());
    if (s.split == "valid") {
      const std::string locale = s.src_lang == "en" ? s.tgt_lang : s.src_lang;
      const auto& [en, x] = first_valid_[locale];
      EXPECT_EQ(tok.Decode(src), s.src_lang == "en" ? en : x);
      EXPECT_EQ(tok.Decode(tgt), s.src_lang == "en" ? x : en);
    }
  }

  const std::string json = ReadText(dir_ / "out" / "shards.json");
  EXPECT_EQ(json, ShardSetJson(*summary));
  EXPECT_THAT(json, HasSubstr("\"vocab_size\": 90,"));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"fingerprint\": \"", tok.ModelFingerprint(), "\"")));
  EXPECT_THAT(json, HasSubstr("\"languages\": [\"en\", \"de\", \"fr\"]"));
  EXPECT_THAT(json, HasSubstr("{\"file\": \"train.de-en.bin\", \"split\": \"train\", "
                              "\"src_lang\": \"de\", \"tgt_lang\": \"en\", \"pairs\": 300, "));
  EXPECT_THAT(json, HasSubstr("\"pairs\": 10, "));
  EXPECT_THAT(json, HasSubstr("\"dropped\": 1}"));
}

TEST_F(ShardBuilderTest, OneDirectionWritesOnlyItsShards) {
  ShardBuildOptions options = Options();
  options.direction = "x2en";
  options.splits = {"valid"};
  const absl::StatusOr<ShardSetSummary> summary = BuildShards(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::vector<std::string> files;
  for (const ShardSummary& s : summary->shards) files.push_back(s.file);
  EXPECT_THAT(files, ElementsAre("valid.de-en.bin", "valid.fr-en.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "valid.en-de.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "train.de-en.bin"));
}

TEST_F(ShardBuilderTest, SameInputsGiveIdenticalOutputs) {
  ShardBuildOptions options = Options();
  ASSERT_TRUE(BuildShards(options).ok());
  options.output_dir = (dir_ / "again").string();
  ASSERT_TRUE(BuildShards(options).ok());
  for (const char* name : {"spm.model", "shards.json", "train.en-de.bin", "valid.fr-en.bin"}) {
    EXPECT_EQ(ReadText(dir_ / "out" / name), ReadText(dir_ / "again" / name)) << name;
  }
}

TEST_F(ShardBuilderTest, ShardsRejectAnotherVocabulary) {
  ShardBuildOptions options = Options();
  ASSERT_TRUE(BuildShards(options).ok());
  options.output_dir = (dir_ / "other").string();
  options.vocab_size = 80;
  ASSERT_TRUE(BuildShards(options).ok());
  auto other = SentencePieceTokenizer::Load((dir_ / "other" / "spm.model").string());
  ASSERT_TRUE(other.ok());
  const absl::Status status = TokenShard::Open((dir_ / "out" / "train.en-de.bin").string(),
                                               (*other)->vocab_size(), (*other)->ModelFingerprint())
                                  .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("vocabulary mismatch"));
}

TEST_F(ShardBuilderTest, ErrorsNameTheFileOrOption) {
  ShardBuildOptions options = Options();
  options.splits = {"train", "test"};
  absl::Status status = BuildShards(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("test.de.tsv"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "spm.model"));  // Checked before training.

  options = Options();
  options.direction = "sideways";
  EXPECT_THAT(std::string(BuildShards(options).status().message()),
              HasSubstr("ShardBuildOptions.direction"));

  std::ofstream(dir_ / "in" / "valid.fr.tsv", std::ios::app) << "en\tde\thello\thallo\n";
  status = BuildShards(Options()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("valid.fr.tsv: pair 11 is en->de, expected en->fr"));
}

}  // namespace
}  // namespace deepnet::data
