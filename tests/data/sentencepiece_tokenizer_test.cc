#include "data/sentencepiece_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "data/multilingual_stream.h"
#include "data/sentencepiece_training.h"
#include "data/splitmix64.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `count` pseudo-words of 2-7 random letters; deterministic per seed.
std::vector<std::string> MakeWords(int count, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::string> words;
  for (int i = 0; i < count; ++i) {
    std::string word;
    for (int n = 2 + static_cast<int>(rng.UniformBelow(6)); n > 0; --n) {
      word += static_cast<char>('a' + rng.UniformBelow(26));
    }
    words.push_back(word);
  }
  return words;
}

// Pseudo-sentences of 3-8 words drawn from `words`; deterministic per seed.
std::vector<std::string> MakeSentences(const std::vector<std::string>& words, int count,
                                       uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<std::string> sentences;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int length = 3 + static_cast<int>(rng.UniformBelow(6));
    for (int w = 0; w < length; ++w) {
      if (w > 0) s += ' ';
      s += words[rng.UniformBelow(words.size())];
    }
    sentences.push_back(s);
  }
  return sentences;
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "deepnet_spm_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // A tiny unigram model over English-like and German-like words with tags en, de, fr.
  SentencePieceTrainOptions TinyOptions() {
    SentencePieceTrainOptions options;
    std::vector<std::string> en_words = MakeWords(60, 11);
    en_words.insert(en_words.end(), {"the", "cat", "sat", "on", "mat", "hello"});
    std::vector<std::string> de_words = MakeWords(60, 12);
    de_words.insert(de_words.end(), {"der", "hund", "ist", "klein", "welt"});
    options.sentences["en"] = MakeSentences(en_words, 400, 1);
    options.sentences["de"] = MakeSentences(de_words, 200, 2);
    options.languages = {"en", "de", "fr"};
    options.vocab_size = 120;
    options.training_sentences = 3000;
    options.model_prefix = (dir_ / "tiny").string();
    return options;
  }

  std::unique_ptr<SentencePieceTokenizer> TrainAndLoad(const SentencePieceTrainOptions& options) {
    const absl::Status status = TrainSentencePiece(options);
    EXPECT_TRUE(status.ok()) << status;
    auto tokenizer = SentencePieceTokenizer::Load(options.model_prefix + ".model");
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  std::filesystem::path dir_;
};

TEST_F(SentencePieceTokenizerTest, TrainedModelHasProjectSpecialIdsAndTags) {
  const auto tokenizer = TrainAndLoad(TinyOptions());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "tiny.vocab"));
  EXPECT_EQ(tokenizer->vocab_size(), 120);
  EXPECT_EQ(tokenizer->pad_id(), 0);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  EXPECT_EQ(tokenizer->unk_id(), 3);
  EXPECT_EQ(tokenizer->LangTagId("en"), 4);
  EXPECT_EQ(tokenizer->LangTagId("de"), 5);
  EXPECT_EQ(tokenizer->LangTagId("fr"), 6);
  EXPECT_EQ(tokenizer->LangTagId("es"), std::nullopt);
  EXPECT_EQ(tokenizer->LangTagId(""), std::nullopt);
  EXPECT_EQ(tokenizer->LangTagId("unk"), std::nullopt);
  EXPECT_THAT(tokenizer->Languages(), ElementsAre("en", "de", "fr"));
  EXPECT_EQ(tokenizer->ModelFingerprint().size(), 16u);
}

TEST_F(SentencePieceTokenizerTest, EncodeDecodeRoundTripsAndSkipsSpecialsAndTags) {
  const auto tokenizer = TrainAndLoad(TinyOptions());
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string text : {"the cat sat on the mat", "der hund ist klein", "hello welt"}) {
    const std::vector<int32_t> ids = tokenizer->Encode(text);
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      EXPECT_GE(id, 7) << text;  // Text only: no specials, no tags.
      EXPECT_LT(id, tokenizer->vocab_size()) << text;
    }
    EXPECT_EQ(tokenizer->Decode(ids), text);
    std::vector<int32_t> framed = {*tokenizer->LangTagId("de"), tokenizer->bos_id()};
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.insert(framed.end(), {tokenizer->unk_id(), tokenizer->eos_id(), tokenizer->pad_id(), -5,
                                 tokenizer->vocab_size()});
    EXPECT_EQ(tokenizer->Decode(framed), text);
  }
}

TEST_F(SentencePieceTokenizerTest, TagsAreSingleTokensThatRoundTrip) {
  const auto tokenizer = TrainAndLoad(TinyOptions());
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string& lang : tokenizer->Languages()) {
    const std::optional<int32_t> tag = tokenizer->LangTagId(lang);
    ASSERT_TRUE(tag.has_value()) << lang;
    // User-defined symbols are matched whole: the tag text encodes to exactly the tag id
    // (after SentencePiece's word-boundary piece "▁", when the text starts with it).
    std::vector<int32_t> ids = tokenizer->Encode("x<2" + lang + ">");
    EXPECT_EQ(ids.back(), *tag) << lang;
    EXPECT_EQ(tokenizer->Decode({*tag}), "") << lang;
  }
}

TEST_F(SentencePieceTokenizerTest, SameOptionsGiveTheSameModelFingerprint) {
  SentencePieceTrainOptions options = TinyOptions();
  const auto first = TrainAndLoad(options);
  options.model_prefix = (dir_ / "again").string();
  const auto second = TrainAndLoad(options);
  options.model_prefix = (dir_ / "other").string();
  options.vocab_size = 110;
  const auto third = TrainAndLoad(options);
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(first->ModelFingerprint(), second->ModelFingerprint());
  EXPECT_NE(first->ModelFingerprint(), third->ModelFingerprint());
}

TEST(TemperatureSamplingTest, ProbabilitiesFollowCountsToTheOneOverT) {
  const std::vector<double> p = TemperatureProbabilities({1000, 10}, 5.0);
  ASSERT_EQ(p.size(), 2u);
  // (1000/1010)^0.2 = 0.998012, (10/1010)^0.2 = 0.397316; normalised 0.715253 / 0.284747.
  EXPECT_NEAR(p[1], 0.284747, 1e-6);
  EXPECT_NEAR(p[0] + p[1], 1.0, 1e-12);
  const std::vector<double> natural = TemperatureProbabilities({1000, 10}, 1.0);
  EXPECT_NEAR(natural[1], 10.0 / 1010.0, 1e-12);
}

TEST(TemperatureSamplingTest, TrainingMixUpsamplesTheSmallLanguage) {
  SentencePieceTrainOptions options;
  options.sentences["big"] = MakeSentences({"a", "b", "c"}, 1000, 3);
  for (int i = 0; i < 10; ++i) options.sentences["small"].push_back("small " + std::to_string(i));
  options.temperature = 5.0;
  options.training_sentences = 20000;
  const std::vector<std::string_view> mix = SampleTrainingMix(options);
  ASSERT_EQ(mix.size(), 20000u);
  std::map<std::string_view, int> small_counts;
  for (std::string_view s : mix) {
    if (s.substr(0, 6) == "small ") ++small_counts[s];
  }
  int small_total = 0;
  for (const auto& [sentence, count] : small_counts) small_total += count;
  const double share = small_total / 20000.0;
  EXPECT_NEAR(share, 0.284747, 0.0001);  // Apportioned exactly: 5695 of 20000.  // Not 10/1010 =
                                         // 0.0099 as natural sampling would give.
  // Upsampling repeats every small sentence equally often (569 or 570 times each).
  ASSERT_EQ(small_counts.size(), 10u);
  for (const auto& [sentence, count] : small_counts) {
    EXPECT_GE(count, small_total / 10) << sentence;
    EXPECT_LE(count, small_total / 10 + 1) << sentence;
  }
}

TEST(TemperatureSamplingTest, MixIsDeterministicPerSeed) {
  SentencePieceTrainOptions options;
  options.sentences["xx"] = MakeSentences({"p", "q", "r", "s"}, 500, 4);
  options.sentences["yy"] = MakeSentences({"t", "u", "v", "w"}, 500, 5);
  options.training_sentences = 300;  // Downsampling: which sentences depends on the seed.
  options.seed = 7;
  const std::vector<std::string_view> a = SampleTrainingMix(options);
  const std::vector<std::string_view> b = SampleTrainingMix(options);
  options.seed = 8;
  const std::vector<std::string_view> c = SampleTrainingMix(options);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 300u);
}

TEST_F(SentencePieceTokenizerTest, InvalidOptionsAreErrorsNamingTheOption) {
  const auto error_for = [&](auto mutate) {
    SentencePieceTrainOptions options = TinyOptions();
    mutate(options);
    return std::string(TrainSentencePiece(options).message());
  };
  EXPECT_THAT(error_for([](auto& o) { o.temperature = 0; }), HasSubstr(".temperature"));
  EXPECT_THAT(error_for([](auto& o) { o.model_type = "wordpiece"; }), HasSubstr(".model_type"));
  EXPECT_THAT(error_for([](auto& o) { o.vocab_size = 7; }), HasSubstr(".vocab_size"));
  EXPECT_THAT(error_for([](auto& o) { o.character_coverage = 1.5; }),
              HasSubstr(".character_coverage"));
  EXPECT_THAT(error_for([](auto& o) { o.languages = {"de,fr"}; }), HasSubstr(".languages"));
  EXPECT_THAT(error_for([](auto& o) { o.sentences["fr"]; }), HasSubstr(".sentences"));
  EXPECT_THAT(error_for([](auto& o) { o.model_prefix.clear(); }), HasSubstr(".model_prefix"));
  EXPECT_THAT(error_for([](auto& o) { o.num_threads = 0; }), HasSubstr(".num_threads"));
  // SentencePiece's own refusal comes back with the settings it was given.
  EXPECT_THAT(error_for([](auto& o) { o.vocab_size = 5000; }), HasSubstr("vocab_size=5000"));
}

TEST_F(SentencePieceTokenizerTest, MissingOrCorruptModelIsAnErrorNamingThePath) {
  const std::string missing = (dir_ / "missing.model").string();
  const auto not_found = SentencePieceTokenizer::Load(missing);
  ASSERT_FALSE(not_found.ok());
  EXPECT_EQ(not_found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(not_found.status().message()), HasSubstr(missing));

  const std::string corrupt = (dir_ / "corrupt.model").string();
  std::ofstream(corrupt, std::ios::binary) << "this is not a protobuf \xff\xff\xff\xff";
  const auto bad = SentencePieceTokenizer::Load(corrupt);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(corrupt));

  // A real model cut in half no longer parses either.
  const SentencePieceTrainOptions options = TinyOptions();
  ASSERT_TRUE(TrainSentencePiece(options).ok());
  const std::string model = options.model_prefix + ".model";
  const auto full_size = std::filesystem::file_size(model);
  std::filesystem::resize_file(model, full_size / 2);
  const auto truncated = SentencePieceTokenizer::Load(model);
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr(model));
}

TEST(Fnv1a64HexTest, MatchesReferenceVectors) {
  // From the FNV reference test suite (Fowler/Noll/Vo, fnv_test.c).
  EXPECT_EQ(Fnv1a64Hex(""), "cbf29ce484222325");
  EXPECT_EQ(Fnv1a64Hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(Fnv1a64Hex("foobar"), "85944171f73967e8");
  EXPECT_NE(Fnv1a64Hex("foobar"), Fnv1a64Hex("foobaR"));
}

}  // namespace
}  // namespace deepnet::data
