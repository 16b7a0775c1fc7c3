#pragma once

// A tiny GNU .mo writer for tests: builds catalogue bytes in memory in either byte order, with
// the layout msgfmt uses (header, original table, translation table, NUL-terminated strings,
// no hash table). Tests patch the result to make malformed files.

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace deepnet::data::mo_test {

struct MoEntry {
  std::string original;     // msgid, "ctx\x04msgid" or "singular\0plural"
  std::string translation;  // msgstr or "form0\0form1..."
};

// Stores a 32-bit word at `offset` in the given byte order.
inline void PutWord(std::string* bytes, size_t offset, uint32_t value, bool big_endian) {
  if (bytes->size() < offset + 4) bytes->resize(offset + 4, '\0');
  for (int i = 0; i < 4; ++i) {
    const int shift = big_endian ? 24 - 8 * i : 8 * i;
    (*bytes)[offset + static_cast<size_t>(i)] = static_cast<char>((value >> shift) & 0xff);
  }
}

// Offsets of the fields of a .mo header.
constexpr size_t kMoCountOffset = 8;
constexpr size_t kMoOrigTableOffset = 12;
constexpr size_t kMoTransTableOffset = 16;
constexpr size_t kMoTablesStart = 28;

// The header entry's msgstr with the given charset and optional Plural-Forms.
inline std::string MoHeader(const std::string& charset, const std::string& plural_forms = "") {
  std::string header = "Project-Id-Version: test\nContent-Type: text/plain; charset=" + charset +
                       "\nContent-Transfer-Encoding: 8bit\n";
  if (!plural_forms.empty()) header += "Plural-Forms: " + plural_forms + "\n";
  return header;
}

// Entry i's original string starts at kMoTablesStart + 8 * N + ... as msgfmt lays it out.
inline std::string WriteMo(const std::vector<MoEntry>& entries, bool big_endian = false) {
  const auto n = static_cast<uint32_t>(entries.size());
  const uint32_t orig_table = kMoTablesStart;
  const uint32_t trans_table = orig_table + 8 * n;
  std::string bytes;
  PutWord(&bytes, 0, 0x950412de, big_endian);
  PutWord(&bytes, 4, 0, big_endian);
  PutWord(&bytes, kMoCountOffset, n, big_endian);
  PutWord(&bytes, kMoOrigTableOffset, orig_table, big_endian);
  PutWord(&bytes, kMoTransTableOffset, trans_table, big_endian);
  PutWord(&bytes, 20, 0, big_endian);  // Hash table size.
  PutWord(&bytes, 24, 0, big_endian);  // Hash table offset.
  bytes.resize(trans_table + 8 * n, '\0');
  auto add_string = [&](const std::string& s, size_t table_slot) {
    PutWord(&bytes, table_slot, static_cast<uint32_t>(s.size()), big_endian);
    PutWord(&bytes, table_slot + 4, static_cast<uint32_t>(bytes.size()), big_endian);
    bytes += s;
    bytes += '\0';
  };
  for (uint32_t i = 0; i < n; ++i) add_string(entries[i].original, orig_table + 8 * i);
  for (uint32_t i = 0; i < n; ++i) add_string(entries[i].translation, trans_table + 8 * i);
  return bytes;
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace deepnet::data::mo_test
