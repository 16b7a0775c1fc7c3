#include "data/byte_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD.

// Decodes raw bytes as if a model had emitted them.
std::string DecodeBytes(const ByteTokenizer& tokenizer, const std::string& bytes) {
  return tokenizer.Decode(tokenizer.Encode(bytes));
}

TEST(ByteTokenizerTest, LaysOutSpecialsThenTagsThenBytes) {
  const ByteTokenizer tokenizer({"de", "fr", "gr"});
  EXPECT_EQ(tokenizer.vocab_size(), 4 + 3 + 256);
  EXPECT_EQ(tokenizer.pad_id(), 0);
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.unk_id(), 3);
  EXPECT_EQ(tokenizer.LangTagId("de"), 4);
  EXPECT_EQ(tokenizer.LangTagId("fr"), 5);
  EXPECT_EQ(tokenizer.LangTagId("gr"), 6);
  EXPECT_EQ(tokenizer.LangTagId("en"), std::nullopt);
  EXPECT_EQ(tokenizer.LangTagId(""), std::nullopt);
  EXPECT_THAT(tokenizer.Languages(), ElementsAre("de", "fr", "gr"));
}

TEST(ByteTokenizerTest, EncodesBytesAfterTheTagsWithoutSignExtension) {
  const ByteTokenizer tokenizer({"de", "fr"});
  // 'A' = 0x41; 0xFF must map to the last id, not to a negative offset.
  EXPECT_THAT(tokenizer.Encode("A\xFF"), ElementsAre(6 + 0x41, 6 + 0xFF));
  EXPECT_EQ(tokenizer.Encode("\xFF")[0], tokenizer.vocab_size() - 1);
  EXPECT_TRUE(tokenizer.Encode("").empty());
}

TEST(ByteTokenizerTest, WorksWithoutLanguages) {
  const ByteTokenizer tokenizer({});
  EXPECT_EQ(tokenizer.vocab_size(), 260);
  EXPECT_THAT(tokenizer.Encode("a"), ElementsAre(4 + 'a'));
  EXPECT_EQ(tokenizer.LangTagId("de"), std::nullopt);
  EXPECT_TRUE(tokenizer.Languages().empty());
}

TEST(ByteTokenizerTest, RoundTripsAsciiAndMultiByteUtf8) {
  const ByteTokenizer tokenizer({"de"});
  const std::string texts[] = {
      "hello, world",
      "",
      "h\xC3\xA9llo w\xC3\xB6rld",             // 2-byte: é ö
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",  // 3-byte: 日本語
      "smile \xF0\x9F\x99\x82!",               // 4-byte: U+1F642
      "\xEF\xBF\xBF \xF4\x8F\xBF\xBF",         // U+FFFF and U+10FFFF
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text)), text) << text;
  }
}

TEST(ByteTokenizerTest, DecodeSkipsSpecialsTagsAndOutOfRangeIds) {
  const ByteTokenizer tokenizer({"de", "fr"});
  std::vector<int32_t> ids = {tokenizer.bos_id(), *tokenizer.LangTagId("fr")};
  for (int32_t id : tokenizer.Encode("ok")) ids.push_back(id);
  ids.push_back(tokenizer.unk_id());
  ids.push_back(tokenizer.pad_id());
  ids.push_back(-1);
  ids.push_back(tokenizer.vocab_size());
  ids.push_back(tokenizer.eos_id());
  EXPECT_EQ(tokenizer.Decode(ids), "ok");
}

TEST(ByteTokenizerTest, DecodeReplacesLoneContinuationAndInvalidLeadBytes) {
  const ByteTokenizer tokenizer({});
  EXPECT_EQ(DecodeBytes(tokenizer, "a\x80z"), std::string("a") + kReplacement + "z");
  EXPECT_EQ(DecodeBytes(tokenizer, "\xFF\xFE"), std::string(kReplacement) + kReplacement);
  EXPECT_EQ(DecodeBytes(tokenizer, "\xF5\x80"), std::string(kReplacement) + kReplacement);
}

TEST(ByteTokenizerTest, DecodeReplacesTruncatedSequenceOnce) {
  const ByteTokenizer tokenizer({});
  // The first two bytes of 日 form one maximal subpart: one U+FFFD, then the rest survives.
  EXPECT_EQ(DecodeBytes(tokenizer, "a\xE6\x97z"), std::string("a") + kReplacement + "z");
  EXPECT_EQ(DecodeBytes(tokenizer, "x\xF0\x9F\x99"), std::string("x") + kReplacement);
  EXPECT_EQ(DecodeBytes(tokenizer, "\xC3"), kReplacement);
}

TEST(ByteTokenizerTest, DecodeRejectsOverlongsSurrogatesAndOutOfRangeCodePoints) {
  const ByteTokenizer tokenizer({});
  const std::string r = kReplacement;
  EXPECT_EQ(DecodeBytes(tokenizer, "\xC0\xAF"), r + r);                  // Overlong '/'.
  EXPECT_EQ(DecodeBytes(tokenizer, "\xE0\x80\xAF"), r + r + r);          // Overlong 3-byte.
  EXPECT_EQ(DecodeBytes(tokenizer, "\xED\xA0\x80"), r + r + r);          // Surrogate U+D800.
  EXPECT_EQ(DecodeBytes(tokenizer, "\xF4\x90\x80\x80"), r + r + r + r);  // U+110000.
  // The largest valid 3-byte value before the surrogates still decodes.
  EXPECT_EQ(DecodeBytes(tokenizer, "\xED\x9F\xBF"), "\xED\x9F\xBF");
}

}  // namespace
}  // namespace deepnet::data
