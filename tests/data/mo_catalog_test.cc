#include "data/mo_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "tests/data/mo_test_writer.h"

namespace deepnet::data {
namespace {

using namespace std::string_literals;

using mo_test::MoEntry;
using mo_test::MoHeader;
using mo_test::PutWord;
using mo_test::WriteMo;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kRussianRule =
    "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
    "(n%100<10 || n%100>=20) ? 1 : 2);";

std::vector<MoEntry> SampleEntries() {
  return {{"", MoHeader("UTF-8", kRussianRule)},
          {"Open", "Открыть"},
          {"menu\x04Quit", "Выход"},
          {"%d file\0%d files"s, "%d файл\0%d файла\0%d файлов"s}};
}

// Expects `status` to be an InvalidArgument error naming the catalogue and the reason.
void ExpectError(const absl::Status& status, const std::string& reason) {
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("bad.mo: "));
  EXPECT_THAT(std::string(status.message()), HasSubstr(reason));
}

class MoCatalogEndianTest : public ::testing::TestWithParam<bool> {};

TEST_P(MoCatalogEndianTest, ParsesHeaderContextAndPluralEntries) {
  const bool big_endian = GetParam();
  absl::StatusOr<MoCatalog> catalog = ParseMo(WriteMo(SampleEntries(), big_endian), "ru.mo");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->big_endian, big_endian);
  EXPECT_EQ(catalog->name, "ru.mo");
  EXPECT_EQ(catalog->charset, "UTF-8");
  EXPECT_EQ(catalog->plural_rule.nplurals(), 3);
  ASSERT_EQ(catalog->messages.size(), 3u);  // The header entry is not a message.
  EXPECT_EQ(catalog->messages[0].msgid, "Open");
  EXPECT_THAT(catalog->messages[0].msgstr, ElementsAre("Открыть"));
  EXPECT_FALSE(catalog->messages[0].is_plural());
  EXPECT_EQ(catalog->messages[1].context, "menu");
  EXPECT_EQ(catalog->messages[1].msgid, "Quit");
  const MoMessage& plural = catalog->messages[2];
  EXPECT_TRUE(plural.is_plural());
  EXPECT_EQ(plural.msgid, "%d file");
  EXPECT_EQ(plural.msgid_plural, "%d files");
  EXPECT_THAT(plural.msgstr, ElementsAre("%d файл", "%d файла", "%d файлов"));
  EXPECT_EQ(*catalog->plural_rule.FormIndex(1), 0);
  EXPECT_EQ(*catalog->plural_rule.FormIndex(5), 2);
}

INSTANTIATE_TEST_SUITE_P(ByteOrder, MoCatalogEndianTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Big" : "Little"; });

TEST(MoCatalogTest, WithoutHeaderDefaultsToUtf8AndGermanicPlural) {
  absl::StatusOr<MoCatalog> catalog = ParseMo(WriteMo({{"Yes", "Ja"}}), "de.mo");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->charset, "UTF-8");
  EXPECT_EQ(catalog->plural_forms, "");
  EXPECT_EQ(*catalog->plural_rule.FormIndex(1), 0);
  EXPECT_EQ(*catalog->plural_rule.FormIndex(5), 1);
}

TEST(MoCatalogTest, ConvertsLegacyCharsetsToUtf8) {
  absl::StatusOr<MoCatalog> catalog = ParseMo(WriteMo({{"", MoHeader("ISO-8859-1")},
                                                       {"Open",
                                                        "\xd6"
                                                        "ffnen"}}),
                                              "de.mo");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->charset, "ISO-8859-1");
  EXPECT_THAT(catalog->messages[0].msgstr, ElementsAre("Öffnen"));
}

TEST(MoCatalogTest, AcceptsOverlappingTables) {
  // Both tables at the same offset: every msgstr is its msgid. Odd, but well defined.
  std::string bytes = WriteMo({{"a", "x"}, {"b", "y"}});
  PutWord(&bytes, mo_test::kMoTransTableOffset, mo_test::kMoTablesStart, false);
  absl::StatusOr<MoCatalog> catalog = ParseMo(bytes, "overlap.mo");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_THAT(catalog->messages[1].msgstr, ElementsAre("b"));
}

TEST(MoCatalogTest, RejectsTruncatedHeaderAndWrongMagic) {
  ExpectError(ParseMo("", "bad.mo").status(), "truncated");
  ExpectError(ParseMo(WriteMo({}).substr(0, 27), "bad.mo").status(), "truncated");
  std::string bytes = WriteMo({{"a", "b"}});
  bytes[0] = 'X';
  ExpectError(ParseMo(bytes, "bad.mo").status(), "bad magic");
  ExpectError(ParseMo(std::string(64, '\0'), "bad.mo").status(), "bad magic");
}

TEST(MoCatalogTest, RejectsUnknownMajorRevision) {
  std::string bytes = WriteMo({{"a", "b"}});
  PutWord(&bytes, 4, 0x20000, false);
  ExpectError(ParseMo(bytes, "bad.mo").status(), "unsupported format revision");
  PutWord(&bytes, 4, 1, false);  // Minor revision 1 is fine.
  EXPECT_TRUE(ParseMo(bytes, "ok.mo").ok());
}

TEST(MoCatalogTest, RejectsCountsAndTablesPastTheEnd) {
  const std::string good = WriteMo({{"a", "b"}, {"c", "d"}});
  for (uint32_t count : {3u, 1000u, 0x1fffffffu, 0xffffffffu}) {
    std::string bytes = good;
    PutWord(&bytes, mo_test::kMoCountOffset, count, false);
    // 3 entries still fit (the tables overlap); their third string does not.
    ExpectError(ParseMo(bytes, "bad.mo").status(), "runs past the end");
  }
  for (uint32_t offset : {static_cast<uint32_t>(good.size()), 0xfffffff8u, 0xffffffffu}) {
    std::string bytes = good;
    PutWord(&bytes, mo_test::kMoOrigTableOffset, offset, false);
    ExpectError(ParseMo(bytes, "bad.mo").status(), "original string table");
    bytes = good;
    PutWord(&bytes, mo_test::kMoTransTableOffset, offset, false);
    ExpectError(ParseMo(bytes, "bad.mo").status(), "translation string table");
  }
}

TEST(MoCatalogTest, RejectsStringsPastTheEndOrOverflowing) {
  const std::string good = WriteMo({{"a", "b"}});
  const size_t orig_entry = mo_test::kMoTablesStart;       // (length, offset) of msgid 0.
  const size_t trans_entry = mo_test::kMoTablesStart + 8;  // (length, offset) of msgstr 0.
  struct Case {
    size_t slot;
    uint32_t value;
  };
  const Case cases[] = {
      {orig_entry, 1000},            // Length past the end.
      {orig_entry + 4, 1000},        // Offset past the end.
      {orig_entry + 4, 0xfffffff0},  // Offset + length overflows 32 bits.
      {orig_entry, 0xffffffff},      // Length overflows.
      {trans_entry, static_cast<uint32_t>(good.size())},
      {trans_entry + 4, static_cast<uint32_t>(good.size() - 1)},  // No room for the NUL.
  };
  for (const Case& c : cases) {
    std::string bytes = good;
    PutWord(&bytes, c.slot, c.value, false);
    ExpectError(ParseMo(bytes, "bad.mo").status(), "runs past the end");
  }
}

TEST(MoCatalogTest, RejectsStringWithoutTerminator) {
  std::string bytes = WriteMo({{"ab", "cd"}});
  bytes[bytes.size() - 1] = 'x';  // The NUL after "cd".
  ExpectError(ParseMo(bytes, "bad.mo").status(), "lacks its NUL terminator");
}

TEST(MoCatalogTest, RejectsInvalidUtf8) {
  ExpectError(ParseMo(WriteMo({{"a", "\xc3\x28"}}), "bad.mo").status(), "invalid UTF-8");
  ExpectError(ParseMo(WriteMo({{"\xff", "b"}}), "bad.mo").status(), "invalid UTF-8");
  ExpectError(ParseMo(WriteMo({{"a", "\xed\xa0\x80"}}), "bad.mo").status(),  // Surrogate.
              "invalid UTF-8");
  ExpectError(ParseMo(WriteMo({{"ctx\xc0\x80\x04id", "b"}}), "bad.mo").status(),  // Overlong.
              "invalid UTF-8");
}

TEST(MoCatalogTest, RejectsUnsupportedCharsets) {
  ExpectError(ParseMo(WriteMo({{"", MoHeader("CHARSET")}, {"a", "b"}}), "bad.mo").status(),
              "unsupported charset \"CHARSET\"");
  // UTF-16 does not keep ASCII, so NUL-separated entries cannot be split before converting.
  ExpectError(ParseMo(WriteMo({{"", MoHeader("UTF-16")}, {"a", "b"}}), "bad.mo").status(),
              "unsupported charset");
  ExpectError(
      ParseMo(WriteMo({{"", MoHeader(std::string(100, 'x'))}, {"a", "b"}}), "bad.mo").status(),
      "unsupported charset");
  // glibc's iconv_open would accept this name by ignoring the junk after ISO-8859-1.
  ExpectError(
      ParseMo(WriteMo({{"", MoHeader("ISO-8859-1\xff\x01junk")}, {"a", "b"}}), "bad.mo").status(),
      "unsupported charset \"ISO-8859-1??junk\"");
  // Bytes that are invalid in the declared charset.
  ExpectError(ParseMo(WriteMo({{"", MoHeader("EUC-JP")}, {"a", "\xa4"}}), "bad.mo").status(),
              "invalid EUC-JP byte sequence");
}

TEST(MoCatalogTest, RejectsUnparsablePluralForms) {
  for (const char* rule : {"nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=n >;",
                           "nplurals=0; plural=0;", "plural=n != 1;"}) {
    ExpectError(ParseMo(WriteMo({{"", MoHeader("UTF-8", rule)}}), "bad.mo").status(), "header: ");
  }
}

TEST(MoCatalogTest, RejectsMalformedPluralEntries) {
  ExpectError(ParseMo(WriteMo({{"a", "x\0y"s}}), "bad.mo").status(),
              "msgstr of a non-plural message contains NUL");
  ExpectError(ParseMo(WriteMo({{"a\0b\0c"s, "x"}}), "bad.mo").status(),
              "more than one plural form");
  ExpectError(ParseMo(WriteMo({{"a\0"s, "x"}}), "bad.mo").status(), "empty msgid_plural");
  std::string forms = "0";
  for (int i = 1; i < 17; ++i) forms += std::string(1, '\0') + std::to_string(i);
  ExpectError(ParseMo(WriteMo({{"a\0b"s, forms}}), "bad.mo").status(), "more than 16 plural forms");
}

TEST(MoCatalogTest, RejectsStringsReferencedFarBeyondTheFileSize) {
  // 200 entries sharing one 64 KiB string: 25 MiB referenced from a 66 KiB file.
  std::vector<MoEntry> entries(200, MoEntry{"a", "b"});
  std::string bytes = WriteMo(entries);
  const auto big_offset = static_cast<uint32_t>(bytes.size());
  bytes += std::string(64 << 10, 'x') + '\0';
  for (size_t i = 0; i < 2 * entries.size(); ++i) {
    PutWord(&bytes, mo_test::kMoTablesStart + 8 * i, 64 << 10, false);
    PutWord(&bytes, mo_test::kMoTablesStart + 8 * i + 4, big_offset, false);
  }
  ExpectError(ParseMo(bytes, "bad.mo").status(), "overlapping strings");
}

class MoFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "deepnet_mo_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::filesystem::path dir_;
};

TEST_F(MoFileTest, ReadsAFileAndNamesThePathInErrors) {
  const std::string good = (dir_ / "good.mo").string();
  mo_test::WriteBytes(good, WriteMo(SampleEntries()));
  absl::StatusOr<MoCatalog> catalog = ReadMoFile(good);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(catalog->name, good);
  EXPECT_EQ(catalog->messages.size(), 3u);

  const std::string bad = (dir_ / "bad.mo").string();
  mo_test::WriteBytes(bad, "not a catalogue at all, just text");
  ExpectError(ReadMoFile(bad).status(), bad + ": bad magic");

  const absl::Status missing = ReadMoFile((dir_ / "missing.mo").string()).status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_THAT(std::string(missing.message()), HasSubstr("missing.mo: cannot open"));
}

TEST_F(MoFileTest, RefusesFilesOverTheSizeLimitWithoutReadingThem) {
  const std::string huge = (dir_ / "huge.mo").string();
  mo_test::WriteBytes(huge, "");
  std::filesystem::resize_file(huge, kMaxMoFileBytes + 1);  // Sparse: no disk used.
  const absl::Status status = ReadMoFile(huge).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("huge.mo: 67108865 bytes exceeds"));
}

TEST_F(MoFileTest, RefusesDirectoriesAndFifosWithoutBlocking) {
  EXPECT_THAT(std::string(ReadMoFile(dir_.string()).status().message()),
              HasSubstr("not a regular file"));
  const std::string fifo = (dir_ / "fifo.mo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(std::string(ReadMoFile(fifo).status().message()),
              HasSubstr("fifo.mo: not a regular file"));
}

// Fuzzer finds and hand-made edge cases (tests/data/mo_corpus/): ok_* must parse, bad_* must fail
// naming the file, anything else (crash-*, timeout-*) must merely return.
TEST(MoCorpusRegressionTest, ParsesEveryCorpusFileWithoutCrashing) {
  const std::filesystem::path dir = DEEPNET_MO_CORPUS_DIR;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".mo") continue;  // README.md
    SCOPED_TRACE(name);
    ++files;
    absl::StatusOr<MoCatalog> catalog = ReadMoFile(entry.path().string());
    if (name.rfind("ok_", 0) == 0) {
      ASSERT_TRUE(catalog.ok()) << catalog.status();
      for (uint64_t n : {0, 1, 2, 5, 11, 100}) (void)catalog->plural_rule.FormIndex(n);
    } else if (name.rfind("bad_", 0) == 0) {
      ASSERT_FALSE(catalog.ok());
      EXPECT_THAT(std::string(catalog.status().message()), HasSubstr(name + ": "));
    }
  }
  EXPECT_GE(files, 19);
}

}  // namespace
}  // namespace deepnet::data
