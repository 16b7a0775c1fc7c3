#include "data/random_token_task.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace deepnet::data {
namespace {

RandomTokenTaskOptions Options(std::string target, uint64_t seed = 5) {
  RandomTokenTaskOptions o;
  o.vocab_size = 12;
  o.pairs = 400;
  o.min_len = 3;
  o.max_len = 7;
  o.target = std::move(target);
  o.seed = seed;
  return o;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(RandomTokenTaskTest, SameSeedSameCorpusOtherSeedOtherCorpus) {
  const auto a = GenerateRandomTokenCorpus(Options("copy"));
  const auto b = GenerateRandomTokenCorpus(Options("copy"));
  const auto c = GenerateRandomTokenCorpus(Options("copy", 6));
  ASSERT_EQ(a.size(), 400u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].src, b[i].src) << i;
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i].src != c[i].src;
  EXPECT_GT(differ, 350);
  // The target rule does not change the sources drawn.
  EXPECT_EQ(a[0].src, GenerateRandomTokenCorpus(Options("reverse"))[0].src);
}

TEST(RandomTokenTaskTest, LengthsAndSymbolsInRangeAndRoughlyUniform) {
  const auto corpus = GenerateRandomTokenCorpus(Options("copy"));
  std::map<std::string, int> counts;
  std::map<size_t, int> lengths;
  int total = 0;
  for (const auto& ex : corpus) {
    const auto words = Words(ex.src);
    ++lengths[words.size()];
    EXPECT_GE(words.size(), 3u);
    EXPECT_LE(words.size(), 7u);
    for (const auto& w : words) {
      ++counts[w];
      ++total;
    }
    EXPECT_EQ(ex.src_lang, "rnd");
    EXPECT_EQ(ex.tgt_lang, "copy");
  }
  EXPECT_EQ(counts.size(), 12u);  // s0..s11, nothing else
  for (int k = 0; k < 12; ++k) {
    const int n = counts["s" + std::to_string(k)];
    EXPECT_NEAR(static_cast<double>(n) / total, 1.0 / 12, 0.03) << k;  // ~2000 draws
  }
  EXPECT_EQ(lengths.size(), 5u);  // every length 3..7 occurs
}

TEST(RandomTokenTaskTest, TargetIsTheDeclaredFunctionOfTheSource) {
  for (const auto& ex : GenerateRandomTokenCorpus(Options("copy"))) EXPECT_EQ(ex.tgt, ex.src);
  for (const auto& ex : GenerateRandomTokenCorpus(Options("reverse"))) {
    auto src = Words(ex.src), tgt = Words(ex.tgt);
    std::reverse(src.begin(), src.end());
    EXPECT_EQ(tgt, src);
    EXPECT_EQ(ex.tgt_lang, "reverse");
  }
  EXPECT_EQ(ApplyRandomTokenTarget("reverse", "s1 s2 s3"), "s3 s2 s1");
}

TEST(RandomTokenTaskTest, TokenizerHasSpecialsTagsThenSymbols) {
  RandomTokenTokenizer tok(12, {"copy"});
  EXPECT_EQ(tok.vocab_size(), 4 + 1 + 12);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 3);
  EXPECT_EQ(tok.LangTagId("copy"), 4);
  EXPECT_FALSE(tok.LangTagId("reverse").has_value());
  EXPECT_EQ(tok.Encode("s0 s11  s5"), (std::vector<int32_t>{5, 16, 10}));
  // Unknown words, out-of-range symbols and non-canonical spellings are unk, not a crash.
  EXPECT_EQ(tok.Encode("s12 x s s01 s-1 s99999999999999999"),
            (std::vector<int32_t>{3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(tok.Decode({1, 4, 5, 16, 3, 2, 10, 999, -1}), "s0 s11 s5");
  for (const auto& ex : GenerateRandomTokenCorpus(Options("copy"))) {
    const auto ids = tok.Encode(ex.src);
    for (int32_t id : ids) {
      EXPECT_GE(id, 5);
      EXPECT_LT(id, tok.vocab_size());
    }
    EXPECT_EQ(tok.Decode(ids), ex.src);
  }
}

}  // namespace
}  // namespace deepnet::data
