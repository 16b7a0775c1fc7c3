#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "storage/atomic_file.h"

// The format is little-endian and the reader maps it as is.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards need a little-endian host");

namespace deepnet::data {
namespace {

constexpr char kMagic[8] = {'D', 'N', 'S', 'H', 'A', 'R', 'D', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFixedHeaderBytes = 56;
constexpr uint32_t kMaxStringBytes = 4096;
constexpr size_t kFlushBytes = 1 << 20;

int IdWidth(int64_t vocab_size) { return vocab_size <= 65535 ? 2 : 4; }
uint64_t Align8(uint64_t n) { return (n + 7) / 8 * 8; }

template <typename T>
void Put(std::string* out, size_t at, T value) {
  std::memcpy(out->data() + at, &value, sizeof(T));
}
template <typename T>
T Get(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// Appends the ids of one side of every example at `width` bytes each, in 1 MiB writes.
absl::Status WriteIds(storage::AtomicFileWriter& writer,
                      const std::vector<TokenizedExample>& examples, bool source, int width) {
  std::string buffer;
  buffer.reserve(kFlushBytes + 4096);
  for (const TokenizedExample& example : examples) {
    for (int32_t id : source ? example.src : example.tgt) {
      const uint32_t value = static_cast<uint32_t>(id);
      buffer.append(reinterpret_cast<const char*>(&value), static_cast<size_t>(width));
    }
    if (buffer.size() >= kFlushBytes) {
      if (absl::Status status = writer.Append(buffer); !status.ok()) return status;
      buffer.clear();
    }
  }
  if (absl::Status status = writer.Append(buffer); !status.ok()) return status;
  return writer.PadTo(8);
}

absl::Status Corrupt(const std::string& path, const std::string& reason) {
  return absl::DataLossError(absl::StrCat(path, ": corrupt token shard: ", reason));
}

}  // namespace

int32_t TokenIds::operator[](size_t i) const {
  if (width_ == 2) return Get<uint16_t>(data_ + 2 * i);
  return static_cast<int32_t>(Get<uint32_t>(data_ + 4 * i));
}

std::vector<int32_t> TokenIds::ToVector() const {
  std::vector<int32_t> ids(size_);
  for (size_t i = 0; i < size_; ++i) ids[i] = (*this)[i];
  return ids;
}

absl::Status WriteTokenShard(const std::string& path, const TokenShardHeader& header,
                             const std::vector<TokenizedExample>& examples) {
  if (header.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": vocab_size must be > 0 (got ", header.vocab_size, ")"));
  }
  for (const std::string* s : {&header.fingerprint, &header.src_lang, &header.tgt_lang}) {
    if (s->size() > kMaxStringBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": header string longer than ", kMaxStringBytes, " bytes"));
    }
  }
  std::vector<uint64_t> src_offsets = {0};
  std::vector<uint64_t> tgt_offsets = {0};
  src_offsets.reserve(examples.size() + 1);
  tgt_offsets.reserve(examples.size() + 1);
  for (size_t i = 0; i < examples.size(); ++i) {
    for (const std::vector<int32_t>* side : {&examples[i].src, &examples[i].tgt}) {
      for (int32_t id : *side) {
        if (id < 0 || id >= header.vocab_size) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": example ", i, " has id ", id,
                                                         " outside [0, ", header.vocab_size, ")"));
        }
      }
    }
    src_offsets.push_back(src_offsets.back() + examples[i].src.size());
    tgt_offsets.push_back(tgt_offsets.back() + examples[i].tgt.size());
  }
  const int width = IdWidth(header.vocab_size);
  std::string fixed(kFixedHeaderBytes, '\0');
  std::memcpy(fixed.data(), kMagic, sizeof(kMagic));
  Put<uint32_t>(&fixed, 8, kVersion);
  Put<uint32_t>(&fixed, 12, static_cast<uint32_t>(width));
  Put<uint32_t>(&fixed, 16, static_cast<uint32_t>(header.vocab_size));
  Put<uint32_t>(&fixed, 20, static_cast<uint32_t>(header.fingerprint.size()));
  Put<uint32_t>(&fixed, 24, static_cast<uint32_t>(header.src_lang.size()));
  Put<uint32_t>(&fixed, 28, static_cast<uint32_t>(header.tgt_lang.size()));
  Put<uint64_t>(&fixed, 32, examples.size());
  Put<uint64_t>(&fixed, 40, src_offsets.back());
  Put<uint64_t>(&fixed, 48, tgt_offsets.back());

  absl::StatusOr<storage::AtomicFileWriter> writer = storage::AtomicFileWriter::Create(path);
  if (!writer.ok()) return writer.status();
  const auto bytes_of = [](const std::vector<uint64_t>& v) {
    return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint64_t));
  };
  for (std::string_view part :
       {std::string_view(fixed), std::string_view(header.fingerprint),
        std::string_view(header.src_lang), std::string_view(header.tgt_lang)}) {
    if (absl::Status status = writer->Append(part); !status.ok()) return status;
  }
  if (absl::Status status = writer->PadTo(8); !status.ok()) return status;
  if (absl::Status status = writer->Append(bytes_of(src_offsets)); !status.ok()) return status;
  if (absl::Status status = writer->Append(bytes_of(tgt_offsets)); !status.ok()) return status;
  if (absl::Status status = WriteIds(*writer, examples, /*source=*/true, width); !status.ok()) {
    return status;
  }
  if (absl::Status status = WriteIds(*writer, examples, /*source=*/false, width); !status.ok()) {
    return status;
  }
  return writer->Commit();
}

absl::StatusOr<TokenShard> TokenShard::Open(const std::string& path, int32_t expected_vocab_size,
                                            const std::string& expected_fingerprint) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot open"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot stat"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kFixedHeaderBytes) {
    ::close(fd);
    return Corrupt(path, absl::StrCat("truncated: ", size, " bytes, shorter than the ",
                                      kFixedHeaderBytes, "-byte header"));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);  // The mapping keeps the file open.
  if (map == MAP_FAILED) {
    return absl::ErrnoToStatus(map_error, absl::StrCat(path, ": cannot mmap"));
  }
  TokenShard shard;  // Owns the mapping from here on, so every error path unmaps it.
  shard.path_ = path;
  shard.map_ = static_cast<const unsigned char*>(map);
  shard.map_size_ = size;
  const unsigned char* base = shard.map_;

  if (std::memcmp(base, kMagic, sizeof(kMagic)) != 0) {
    return Corrupt(path, "bad magic (not a DeepNet token shard)");
  }
  if (const uint32_t version = Get<uint32_t>(base + 8); version != kVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": unsupported token shard format version ", version,
                     " (this build reads ", kVersion, ")"));
  }
  const uint32_t width = Get<uint32_t>(base + 12);
  const uint32_t vocab_size = Get<uint32_t>(base + 16);
  const uint32_t lengths[3] = {Get<uint32_t>(base + 20), Get<uint32_t>(base + 24),
                               Get<uint32_t>(base + 28)};
  const uint64_t count = Get<uint64_t>(base + 32);
  const uint64_t num_src = Get<uint64_t>(base + 40);
  const uint64_t num_tgt = Get<uint64_t>(base + 48);
  if (vocab_size == 0 || vocab_size > INT32_MAX) {
    return Corrupt(path, absl::StrCat("vocab_size ", vocab_size, " out of range"));
  }
  if (width != static_cast<uint32_t>(IdWidth(vocab_size))) {
    return Corrupt(path,
                   absl::StrCat("id width ", width, " does not match vocab_size ", vocab_size));
  }
  uint64_t strings_end = kFixedHeaderBytes;
  for (uint32_t length : lengths) {
    if (length > kMaxStringBytes) {
      return Corrupt(path, absl::StrCat("header string of ", length, " bytes"));
    }
    strings_end += length;
  }
  if (strings_end > size) return Corrupt(path, "truncated inside the header strings");
  const char* strings = reinterpret_cast<const char*>(base + kFixedHeaderBytes);
  shard.header_.vocab_size = static_cast<int32_t>(vocab_size);
  shard.header_.fingerprint.assign(strings, lengths[0]);
  shard.header_.src_lang.assign(strings + lengths[0], lengths[1]);
  shard.header_.tgt_lang.assign(strings + lengths[0] + lengths[1], lengths[2]);

  if (shard.header_.vocab_size != expected_vocab_size ||
      shard.header_.fingerprint != expected_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": vocabulary mismatch: the shard was built with vocab_size ", vocab_size,
        " (fingerprint '", shard.header_.fingerprint, "') but the tokenizer has vocab_size ",
        expected_vocab_size, " (fingerprint '", expected_fingerprint,
        "'); rebuild the shards or use the spm.model they were built with"));
  }

  // Every count is bounded by the file size before it is multiplied, so nothing overflows.
  if (count > size / 16 || num_src > size / width || num_tgt > size / width) {
    return Corrupt(path, absl::StrCat("counts (", count, " examples, ", num_src, " + ", num_tgt,
                                      " ids) do not fit in a file of ", size, " bytes"));
  }
  const uint64_t offsets_at = Align8(strings_end);
  const uint64_t src_ids_at = offsets_at + 16 * (count + 1);
  const uint64_t tgt_ids_at = src_ids_at + Align8(num_src * width);
  const uint64_t expected_size = tgt_ids_at + Align8(num_tgt * width);
  if (expected_size != size) {
    return Corrupt(path, absl::StrCat(expected_size > size ? "truncated" : "trailing bytes",
                                      ": the header describes ", expected_size,
                                      " bytes, the file has ", size));
  }
  shard.width_ = static_cast<int>(width);
  shard.count_ = static_cast<size_t>(count);
  shard.num_src_ = num_src;
  shard.num_tgt_ = num_tgt;
  shard.src_offsets_ = base + offsets_at;
  shard.tgt_offsets_ = base + offsets_at + 8 * (count + 1);
  shard.src_ids_ = base + src_ids_at;
  shard.tgt_ids_ = base + tgt_ids_at;

  for (const bool source : {true, false}) {
    const char* side = source ? "src" : "tgt";
    const unsigned char* table = source ? shard.src_offsets_ : shard.tgt_offsets_;
    const uint64_t total = source ? num_src : num_tgt;
    if (shard.Offset(table, 0) != 0) return Corrupt(path, absl::StrCat(side, " offset[0] != 0"));
    for (size_t i = 1; i <= shard.count_; ++i) {
      if (shard.Offset(table, i) < shard.Offset(table, i - 1)) {
        return Corrupt(
            path, absl::StrCat(side, " offset[", i, "] = ", shard.Offset(table, i),
                               " is below offset[", i - 1, "] = ", shard.Offset(table, i - 1)));
      }
    }
    if (shard.Offset(table, shard.count_) != total) {
      return Corrupt(path, absl::StrCat(side, " offsets end at ", shard.Offset(table, shard.count_),
                                        " but the header counts ", total, " ids"));
    }
    const TokenIds ids(source ? shard.src_ids_ : shard.tgt_ids_, total, shard.width_);
    for (size_t i = 0; i < total; ++i) {
      if (static_cast<uint32_t>(ids[i]) >= vocab_size) {
        return Corrupt(path, absl::StrCat(side, " id ", static_cast<uint32_t>(ids[i]),
                                          " at position ", i, " is >= vocab_size ", vocab_size));
      }
    }
  }
  return shard;
}

TokenShard::TokenShard(TokenShard&& other) noexcept { *this = std::move(other); }

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this == &other) return *this;
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_size_);
  path_ = std::move(other.path_);
  header_ = std::move(other.header_);
  map_ = std::exchange(other.map_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  width_ = other.width_;
  count_ = std::exchange(other.count_, 0);
  num_src_ = other.num_src_;
  num_tgt_ = other.num_tgt_;
  src_offsets_ = other.src_offsets_;
  tgt_offsets_ = other.tgt_offsets_;
  src_ids_ = other.src_ids_;
  tgt_ids_ = other.tgt_ids_;
  return *this;
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_size_);
}

uint64_t TokenShard::Offset(const unsigned char* table, size_t i) const {
  return Get<uint64_t>(table + 8 * i);
}

TokenIds TokenShard::src(size_t i) const {
  const uint64_t begin = Offset(src_offsets_, i);
  return TokenIds(src_ids_ + begin * width_, Offset(src_offsets_, i + 1) - begin, width_);
}

TokenIds TokenShard::tgt(size_t i) const {
  const uint64_t begin = Offset(tgt_offsets_, i);
  return TokenIds(tgt_ids_ + begin * width_, Offset(tgt_offsets_, i + 1) - begin, width_);
}

std::vector<TokenizedExample> TokenShard::ReadAll() const {
  std::vector<TokenizedExample> examples(count_);
  for (size_t i = 0; i < count_; ++i) {
    examples[i].src = src(i).ToVector();
    examples[i].tgt = tgt(i).ToVector();
  }
  return examples;
}

}  // namespace deepnet::data
