#include "data/mo_catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <iconv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace deepnet::data {
namespace {

constexpr uint32_t kMagic = 0x950412de;
constexpr uint32_t kMagicSwapped = 0xde120495;
constexpr size_t kHeaderBytes = 28;  // magic, revision, N, O, T, hash size, hash offset.

// Reads the 32-bit word at `offset`; the caller has checked the bounds.
uint32_t Word(std::string_view bytes, uint64_t offset, bool big_endian) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  if (big_endian) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  }
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

// Value of header field `key` ("Plural-Forms"), or nullopt. Header lines are "Key: value".
std::optional<std::string_view> HeaderField(std::string_view header, std::string_view key) {
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find('\n', start);
    if (end == std::string_view::npos) end = header.size();
    std::string_view line = header.substr(start, end - start);
    start = end + 1;
    if (line.size() > key.size() && EqualsIgnoreCase(line.substr(0, key.size()), key) &&
        line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      return line;
    }
  }
  return std::nullopt;
}

// The charset= parameter of Content-Type; "" when absent.
std::string_view CharsetOf(std::string_view header) {
  const std::optional<std::string_view> type = HeaderField(header, "Content-Type");
  if (!type.has_value()) return "";
  const size_t at = type->find("charset=");
  if (at == std::string_view::npos) return "";
  std::string_view charset = type->substr(at + 8);
  size_t end = 0;
  while (end < charset.size() && charset[end] != ';' && charset[end] != ' ' &&
         charset[end] != '\t' && charset[end] != '\r') {
    ++end;
  }
  return charset.substr(0, end);
}

// Converts strings from one charset to UTF-8 with iconv(3). Move-only owner of the descriptor.
class Iconv {
 public:
  static std::optional<Iconv> Open(const std::string& charset) {
    iconv_t cd = iconv_open("UTF-8", charset.c_str());
    if (cd == reinterpret_cast<iconv_t>(-1)) return std::nullopt;
    return Iconv(cd);
  }
  Iconv(Iconv&& other) noexcept : cd_(std::exchange(other.cd_, kNone)) {}
  Iconv& operator=(Iconv&& other) noexcept {
    if (this != &other) {
      Close();
      cd_ = std::exchange(other.cd_, kNone);
    }
    return *this;
  }
  ~Iconv() { Close(); }

  // False on an invalid or incomplete sequence. Output is bounded by 4 bytes per input byte
  // plus a shift sequence, so the buffer grows at most a few times.
  bool Convert(std::string_view in, std::string* out) {
    iconv(cd_, nullptr, nullptr, nullptr, nullptr);  // Reset the shift state.
    out->assign(in.size() + 16, '\0');
    char* src = const_cast<char*>(in.data());
    size_t src_left = in.size();
    size_t done = 0;
    for (;;) {
      char* dst = out->data() + done;
      size_t dst_left = out->size() - done;
      const size_t rc = src_left == 0 ? iconv(cd_, nullptr, nullptr, &dst, &dst_left)
                                      : iconv(cd_, &src, &src_left, &dst, &dst_left);
      done = out->size() - dst_left;
      if (rc != static_cast<size_t>(-1)) {
        if (src_left == 0) break;
        continue;
      }
      if (errno != E2BIG || out->size() > 8 * in.size() + 64) return false;
      out->resize(out->size() * 2);
    }
    out->resize(done);
    return true;
  }

 private:
  static inline const iconv_t kNone = reinterpret_cast<iconv_t>(-1);
  explicit Iconv(iconv_t cd) : cd_(cd) {}
  void Close() {
    if (cd_ != kNone) iconv_close(cd_);
    cd_ = kNone;
  }
  iconv_t cd_;
};

bool IsUtf8Name(std::string_view charset) {
  return charset.empty() || EqualsIgnoreCase(charset, "UTF-8") || EqualsIgnoreCase(charset, "UTF8");
}

// ASCII is a subset of UTF-8, so it is read as UTF-8 (and validated as such).
bool IsAsciiName(std::string_view charset) {
  return EqualsIgnoreCase(charset, "ASCII") || EqualsIgnoreCase(charset, "US-ASCII") ||
         EqualsIgnoreCase(charset, "ANSI_X3.4-1968");
}

// A charset name as IANA and iconv spell them: letters, digits and ._:+-() only. glibc's
// iconv_open ignores other characters, so "ISO-8859-1" followed by binary junk would be accepted
// (a fuzzer find) and the junk would reach messages and the catalogue.
bool IsCharsetName(std::string_view charset) {
  if (charset.empty() || charset.size() > 64) return false;
  for (char c : charset) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("._:+-()").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// `s` with bytes outside printable ASCII replaced by '?', for text copied from a header.
std::string Printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

// Splits at the first `sep`; `rest` is nullopt when there is none.
std::pair<std::string_view, std::optional<std::string_view>> SplitOnce(std::string_view s,
                                                                       char sep) {
  const size_t at = s.find(sep);
  if (at == std::string_view::npos) return {s, std::nullopt};
  return {s.substr(0, at), s.substr(at + 1)};
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      extra = 1, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;  // Continuation byte, overlong 2-byte lead (c0, c1), or > U+10FFFF lead.
    }
    if (s.size() - i <= static_cast<size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

absl::StatusOr<MoCatalog> ParseMo(std::string_view bytes, std::string_view name) {
  auto error = [&name](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(name.data(), name.size()), ": ", parts...));
  };
  if (bytes.size() < kHeaderBytes) {
    return error("truncated: ", bytes.size(), " bytes, a .mo header needs ", kHeaderBytes);
  }
  MoCatalog catalog;
  catalog.name = std::string(name);
  const uint32_t magic = Word(bytes, 0, false);
  if (magic != kMagic && magic != kMagicSwapped) {
    return error("bad magic 0x", absl::Hex(magic, absl::kZeroPad8), ", not a .mo file");
  }
  const bool be = magic == kMagicSwapped;
  catalog.big_endian = be;
  const uint32_t revision = Word(bytes, 4, be);
  if ((revision >> 16) > 1) return error("unsupported format revision 0x", absl::Hex(revision));
  const uint64_t count = Word(bytes, 8, be);
  const uint64_t orig_table = Word(bytes, 12, be);
  const uint64_t trans_table = Word(bytes, 16, be);
  // 64-bit arithmetic: a 32-bit count times 8 plus a 32-bit offset cannot overflow.
  for (const auto& [what, offset] :
       {std::pair{"original", orig_table}, {"translation", trans_table}}) {
    if (offset + count * 8 > bytes.size()) {
      return error(what, " string table (", count, " entries at offset ", offset,
                   ") runs past the end of the ", bytes.size(), "-byte file");
    }
  }
  const uint64_t budget = kMaxMoStringExpansion * uint64_t{bytes.size()} + (uint64_t{1} << 20);
  uint64_t referenced = 0;
  // The string of entry i in the table at `table`, bounds- and terminator-checked.
  auto string_at = [&](uint64_t table, uint64_t i, const char* what,
                       std::string_view* out) -> absl::Status {
    const uint64_t length = Word(bytes, table + 8 * i, be);
    const uint64_t offset = Word(bytes, table + 8 * i + 4, be);
    if (offset + length + 1 > bytes.size()) {
      return error(what, " string ", i, " (", length, " bytes at offset ", offset,
                   ") runs past the end of the ", bytes.size(), "-byte file");
    }
    if (bytes[offset + length] != '\0') {
      return error(what, " string ", i, " at offset ", offset, " lacks its NUL terminator");
    }
    referenced += length;
    if (referenced > budget) {
      return error("strings reference ", referenced, " bytes of a ", bytes.size(),
                   "-byte file (overlapping strings beyond the ", kMaxMoStringExpansion,
                   "x limit)");
    }
    *out = bytes.substr(offset, length);
    return absl::OkStatus();
  };

  // The header entry (empty msgid) declares the charset and plural rule for all the others.
  std::optional<uint64_t> header_index;
  for (uint64_t i = 0; i < count && !header_index.has_value(); ++i) {
    if (Word(bytes, orig_table + 8 * i, be) == 0) header_index = i;
  }
  std::optional<Iconv> converter;
  if (header_index.has_value()) {
    std::string_view header;
    absl::Status status = string_at(trans_table, *header_index, "translation", &header);
    if (!status.ok()) return status;
    const std::string_view charset = CharsetOf(header);
    if (!charset.empty() && !IsCharsetName(charset)) {
      return error("unsupported charset \"", Printable(charset.substr(0, 64)), "\"");
    }
    catalog.charset = std::string(charset);
    if (!IsUtf8Name(catalog.charset) && !IsAsciiName(catalog.charset)) {
      converter = Iconv::Open(catalog.charset);
      // Entries are split on NUL and \x04 before conversion, so the charset must keep ASCII.
      std::string probe;
      if (!converter.has_value() || !converter->Convert("Aa0 \x04", &probe) ||
          probe != "Aa0 \x04") {
        return error("unsupported charset \"", catalog.charset, "\"");
      }
    }
    const std::optional<std::string_view> plural = HeaderField(header, "Plural-Forms");
    if (plural.has_value()) {
      catalog.plural_forms = Printable(*plural);
      absl::StatusOr<PluralRule> rule = PluralRule::ParseHeader(*plural);
      if (!rule.ok()) return error("header: ", rule.status().message());
      catalog.plural_rule = *std::move(rule);
    }
  }
  if (catalog.charset.empty()) catalog.charset = "UTF-8";

  // Decodes one piece to UTF-8 (converted or validated) for entry i.
  auto decode = [&](std::string_view raw, uint64_t i, std::string* out) -> absl::Status {
    if (converter.has_value()) {
      if (!converter->Convert(raw, out) || !IsValidUtf8(*out)) {
        return error("entry ", i, ": invalid ", catalog.charset, " byte sequence");
      }
    } else if (!IsValidUtf8(raw)) {
      return error("entry ", i, ": invalid UTF-8");
    } else {
      out->assign(raw.data(), raw.size());
    }
    return absl::OkStatus();
  };

  // Not reserve(count): 8 table bytes per entry would become ~150 bytes of MoMessage at once.
  catalog.messages.reserve(std::min<uint64_t>(count, 4096));
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view orig;
    std::string_view trans;
    absl::Status status = string_at(orig_table, i, "original", &orig);
    if (status.ok()) status = string_at(trans_table, i, "translation", &trans);
    if (!status.ok()) return status;
    if (header_index.has_value() && i == *header_index) continue;
    MoMessage message;
    auto [context_or_id, after_context] = SplitOnce(orig, '\x04');
    std::string_view ids = context_or_id;
    if (after_context.has_value()) {
      status = decode(context_or_id, i, &message.context);
      if (!status.ok()) return status;
      ids = *after_context;
    }
    auto [msgid, plural] = SplitOnce(ids, '\0');
    status = decode(msgid, i, &message.msgid);
    if (!status.ok()) return status;
    if (plural.has_value()) {
      if (plural->find('\0') != std::string_view::npos) {
        return error("entry ", i, ": msgid has more than one plural form");
      }
      status = decode(*plural, i, &message.msgid_plural);
      if (!status.ok()) return status;
      if (message.msgid_plural.empty()) return error("entry ", i, ": empty msgid_plural");
    }
    // Forms are NUL-separated; a non-plural message has exactly one.
    for (;;) {
      auto [form, rest] = SplitOnce(trans, '\0');
      if (rest.has_value() && !plural.has_value()) {
        return error("entry ", i, ": msgstr of a non-plural message contains NUL");
      }
      if (message.msgstr.size() >= static_cast<size_t>(PluralRule::kMaxPlurals)) {
        return error("entry ", i, ": more than ", PluralRule::kMaxPlurals, " plural forms");
      }
      message.msgstr.emplace_back();
      status = decode(form, i, &message.msgstr.back());
      if (!status.ok()) return status;
      if (!rest.has_value()) break;
      trans = *rest;
    }
    catalog.messages.push_back(std::move(message));
  }
  return catalog;
}

absl::StatusOr<MoCatalog> ReadMoFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadMoBytes(path);
  if (!bytes.ok()) return bytes.status();
  return ParseMo(*bytes, path);
}

absl::StatusOr<std::string> ReadMoBytes(const std::string& path) {
  auto errno_error = [&path](const char* what) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": ", what, ": ", strerror(error)));
  };
  // O_NONBLOCK: opening a FIFO must not hang; it is then refused as not a regular file.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno_error("cannot open");
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno_error("cannot stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxMoFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes exceeds the .mo limit of ", kMaxMoFileBytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read failed");
    if (n == 0) break;  // The file shrank while being read.
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace deepnet::data
