#include "data/token_shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "data/parallel_corpus.h"

namespace deepnet::data {
namespace {

using ::testing::HasSubstr;

constexpr char kFingerprint[] = "0123456789abcdef";

class TokenShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet_shard_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static TokenShardHeader Header(int32_t vocab_size) {
    return TokenShardHeader{vocab_size, kFingerprint, "en", "de"};
  }

  // Three examples, one with an empty target, using ids up to vocab_size - 1.
  static std::vector<TokenizedExample> Examples(int32_t vocab_size) {
    return {{{4, 10, 11, 2}, {12, 2}},
            {{4, vocab_size - 1, 2}, {}},
            {{5, 2}, {vocab_size - 1, 13, 14, 2}}};
  }

  std::string ReadBytes(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  void WriteBytes(const std::string& path, const std::string& bytes) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  // Writes the standard shard, lets `corrupt` edit its bytes, and returns Open's status.
  template <typename F>
  absl::Status OpenCorrupted(F corrupt) {
    const std::string path = Path("corrupt.bin");
    EXPECT_TRUE(WriteTokenShard(path, Header(1000), Examples(1000)).ok());
    std::string bytes = ReadBytes(path);
    corrupt(bytes);
    WriteBytes(path, bytes);
    return TokenShard::Open(path, 1000, kFingerprint).status();
  }

  void ExpectRoundTrip(const std::string& path, int32_t vocab_size, int expected_width) {
    const std::vector<TokenizedExample> examples = Examples(vocab_size);
    ASSERT_TRUE(WriteTokenShard(path, Header(vocab_size), examples).ok());
    absl::StatusOr<TokenShard> shard = TokenShard::Open(path, vocab_size, kFingerprint);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->id_width(), expected_width);
    EXPECT_EQ(shard->header().src_lang, "en");
    EXPECT_EQ(shard->header().tgt_lang, "de");
    EXPECT_EQ(shard->header().fingerprint, kFingerprint);
    ASSERT_EQ(shard->size(), 3u);
    EXPECT_EQ(shard->num_src_tokens(), 9u);
    EXPECT_EQ(shard->num_tgt_tokens(), 6u);
    EXPECT_EQ(shard->src(1).size(), 3u);
    EXPECT_EQ(shard->src(1)[1], vocab_size - 1);
    EXPECT_TRUE(shard->tgt(1).empty());
    const std::vector<TokenizedExample> back = shard->ReadAll();
    ASSERT_EQ(back.size(), examples.size());
    for (size_t i = 0; i < examples.size(); ++i) {
      EXPECT_EQ(back[i].src, examples[i].src) << i;
      EXPECT_EQ(back[i].tgt, examples[i].tgt) << i;
    }
    EXPECT_EQ(std::filesystem::file_size(path) % 8, 0u);
  }

  std::filesystem::path dir_;
};

TEST_F(TokenShardTest, RoundTripsTwoByteIds) { ExpectRoundTrip(Path("a.bin"), 65535, 2); }

TEST_F(TokenShardTest, RoundTripsFourByteIds) { ExpectRoundTrip(Path("b.bin"), 100000, 4); }

TEST_F(TokenShardTest, RoundTripsAnEmptyShard) {
  const std::string path = Path("empty.bin");
  ASSERT_TRUE(WriteTokenShard(path, Header(100), {}).ok());
  absl::StatusOr<TokenShard> shard = TokenShard::Open(path, 100, kFingerprint);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->size(), 0u);
  EXPECT_TRUE(shard->ReadAll().empty());
}

TEST_F(TokenShardTest, WriteLeavesNoTemporaryFilesAndReplacesAtomically) {
  const std::string path = Path("x.bin");
  ASSERT_TRUE(WriteTokenShard(path, Header(1000), Examples(1000)).ok());
  ASSERT_TRUE(WriteTokenShard(path, Header(1000), {}).ok());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "x.bin");
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(TokenShard::Open(path, 1000, kFingerprint)->size(), 0u);
}

TEST_F(TokenShardTest, RejectsIdsOutsideTheVocabularyWhenWriting) {
  const std::string path = Path("bad.bin");
  const absl::Status too_big = WriteTokenShard(path, Header(1000), Examples(1001));
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr(path));
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("example 1"));
  EXPECT_FALSE(WriteTokenShard(path, Header(1000), {{{-1}, {2}}}).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(TokenShardTest, MissingFileIsNotFound) {
  const absl::Status status = TokenShard::Open(Path("none.bin"), 1000, kFingerprint).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(Path("none.bin")));
}

TEST_F(TokenShardTest, TruncatedFileIsAnErrorNamingTheFile) {
  for (size_t keep : {0, 20, 60, 100}) {
    const absl::Status status = OpenCorrupted([&](std::string& b) { b.resize(keep); });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_THAT(std::string(status.message()), HasSubstr(Path("corrupt.bin"))) << keep;
    EXPECT_THAT(std::string(status.message()), HasSubstr("truncated")) << keep;
  }
  const absl::Status last_byte = OpenCorrupted([](std::string& b) { b.pop_back(); });
  EXPECT_THAT(std::string(last_byte.message()), HasSubstr("truncated"));
  const absl::Status extra = OpenCorrupted([](std::string& b) { b += std::string(8, '\0'); });
  EXPECT_THAT(std::string(extra.message()), HasSubstr("trailing bytes"));
}

TEST_F(TokenShardTest, BadMagicIsAnErrorNamingTheFile) {
  const absl::Status status = OpenCorrupted([](std::string& b) { b[0] = 'X'; });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr(Path("corrupt.bin")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("bad magic"));
  const absl::Status version = OpenCorrupted([](std::string& b) { b[8] = 2; });
  EXPECT_THAT(std::string(version.message()), HasSubstr("version 2"));
}

TEST_F(TokenShardTest, CorruptOffsetsAreErrorsNamingTheFile) {
  // Layout of the standard shard: 56-byte header + 20 string bytes padded to 80, then the
  // src offsets [0, 4, 7, 9] at 80..111 and tgt offsets [0, 2, 2, 6] at 112..143.
  const auto set_u64 = [](std::string& b, size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); };
  const absl::Status decreasing = OpenCorrupted([&](std::string& b) { set_u64(b, 88, 8); });
  EXPECT_EQ(decreasing.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(decreasing.message()), HasSubstr(Path("corrupt.bin")));
  EXPECT_THAT(std::string(decreasing.message()),
              HasSubstr("src offset[2] = 7 is below offset[1] = 8"));
  const absl::Status start = OpenCorrupted([&](std::string& b) { set_u64(b, 112, 1); });
  EXPECT_THAT(std::string(start.message()), HasSubstr("tgt offset[0] != 0"));
  const absl::Status end = OpenCorrupted([&](std::string& b) { set_u64(b, 136, 5); });
  EXPECT_THAT(std::string(end.message()), HasSubstr("tgt offsets end at 5"));
  const absl::Status huge = OpenCorrupted([&](std::string& b) { set_u64(b, 32, 1ULL << 60); });
  EXPECT_THAT(std::string(huge.message()), HasSubstr("do not fit"));
}

TEST_F(TokenShardTest, IdOutsideTheVocabularyIsAnError) {
  // The first src id (4) is at 144, two bytes wide.
  const absl::Status status = OpenCorrupted([](std::string& b) {
    const uint16_t id = 1000;
    std::memcpy(&b[144], &id, 2);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("src id 1000 at position 0 is >= vocab_size 1000"));
}

TEST_F(TokenShardTest, VocabularyMismatchIsAnErrorSayingSo) {
  const std::string path = Path("v.bin");
  ASSERT_TRUE(WriteTokenShard(path, Header(1000), Examples(1000)).ok());
  for (const auto& [vocab, fingerprint] : std::vector<std::pair<int32_t, std::string>>{
           {1000, "fedcba9876543210"}, {999, kFingerprint}}) {
    const absl::Status status = TokenShard::Open(path, vocab, fingerprint).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(status.message()), HasSubstr(path));
    EXPECT_THAT(std::string(status.message()), HasSubstr("vocabulary mismatch"));
  }
  EXPECT_TRUE(TokenShard::Open(path, 1000, kFingerprint).ok());
}

TEST_F(TokenShardTest, MovedShardKeepsItsMapping) {
  const std::string path = Path("m.bin");
  ASSERT_TRUE(WriteTokenShard(path, Header(1000), Examples(1000)).ok());
  absl::StatusOr<TokenShard> opened = TokenShard::Open(path, 1000, kFingerprint);
  ASSERT_TRUE(opened.ok());
  TokenShard moved = *std::move(opened);
  TokenShard assigned = std::move(moved);
  EXPECT_EQ(assigned.size(), 3u);
  EXPECT_EQ(assigned.tgt(2).ToVector(), (std::vector<int32_t>{999, 13, 14, 2}));
}

}  // namespace
}  // namespace deepnet::data
