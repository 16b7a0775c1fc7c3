#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/parallel_corpus.h"

namespace deepnet::data {

/// What a shard records about its contents, besides the examples.
struct TokenShardHeader {
  // Ids are in [0, vocab_size); > 0. Ids take 2 bytes when vocab_size <= 65535, else 4.
  int32_t vocab_size = 0;
  // Identifies the vocabulary (SentencePieceTokenizer::ModelFingerprint()); at most 4096 bytes.
  std::string fingerprint;
  // Language codes of the pair; at most 4096 bytes each.
  std::string src_lang;
  std::string tgt_lang;
};

/// Writes `examples` as a binary shard at `path`, atomically (temporary file, fsync, rename).
/// Layout, little-endian, each section starting at a multiple of 8 bytes:
///   "DNSHARD1", u32 version (1), u32 id width (2|4), u32 vocab_size, u32 fingerprint length,
///   u32 src_lang length, u32 tgt_lang length, u64 count, u64 src ids, u64 tgt ids,
///   fingerprint + src_lang + tgt_lang bytes, u64 src offsets[count + 1],
///   u64 tgt offsets[count + 1], src ids, tgt ids.
/// An id outside [0, vocab_size) is an error naming the path and example.
[[nodiscard]] absl::Status WriteTokenShard(const std::string& path, const TokenShardHeader& header,
                                           const std::vector<TokenizedExample>& examples);

/// The ids of one sentence inside a mapped shard: valid while its TokenShard lives.
class TokenIds {
 public:
  TokenIds(const unsigned char* data, size_t size, int width)
      : data_(data), size_(size), width_(width) {}
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t operator[](size_t i) const;
  std::vector<int32_t> ToVector() const;

 private:
  const unsigned char* data_;
  size_t size_;
  int width_;  // Bytes per id: 2 or 4.
};

/// A read-only, memory-mapped token shard. Open() checks everything before handing it out:
/// magic, version, exact file size, vocabulary (size and fingerprint), offsets (start at 0,
/// non-decreasing, end at the id count) and that every id is < vocab_size, so a shard that
/// opens can never yield garbage. Immutable: safe for concurrent use. Move-only.
class TokenShard {
 public:
  // Maps `path`. A vocabulary other than (expected_vocab_size, expected_fingerprint) is a
  // FailedPrecondition saying so; a malformed file is DataLoss. Errors name the file.
  [[nodiscard]] static absl::StatusOr<TokenShard> Open(const std::string& path,
                                                       int32_t expected_vocab_size,
                                                       const std::string& expected_fingerprint);

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  const std::string& path() const { return path_; }
  const TokenShardHeader& header() const { return header_; }
  int id_width() const { return width_; }
  // Number of examples.
  size_t size() const { return count_; }
  // Ids of example i < size(): `<2tgt> text EOS` and `text EOS`, as TokenizeCorpus made them.
  TokenIds src(size_t i) const;
  TokenIds tgt(size_t i) const;
  uint64_t num_src_tokens() const { return num_src_; }
  uint64_t num_tgt_tokens() const { return num_tgt_; }
  // Copies every example out.
  std::vector<TokenizedExample> ReadAll() const;

 private:
  TokenShard() = default;
  uint64_t Offset(const unsigned char* table, size_t i) const;

  std::string path_;
  TokenShardHeader header_;
  const unsigned char* map_ = nullptr;  // Owned mmap of the whole file; null when moved from.
  size_t map_size_ = 0;
  int width_ = 0;
  size_t count_ = 0;
  uint64_t num_src_ = 0;
  uint64_t num_tgt_ = 0;
  const unsigned char* src_offsets_ = nullptr;  // [count + 1] u64
  const unsigned char* tgt_offsets_ = nullptr;  // [count + 1] u64
  const unsigned char* src_ids_ = nullptr;
  const unsigned char* tgt_ids_ = nullptr;
};

}  // namespace deepnet::data
