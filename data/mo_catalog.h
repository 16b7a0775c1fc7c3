#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/plural_forms.h"

namespace deepnet::data {

/// One translated message of a catalogue, decoded to UTF-8.
struct MoMessage {
  std::string context;       // msgctxt (the msgid's part before \x04); empty when none.
  std::string msgid;         // The English source (singular for a plural entry).
  std::string msgid_plural;  // Empty unless this is a plural entry.
  // One translation, or for a plural entry the forms in catalogue order (form i is what
  // the catalogue's plural rule selects with index i).
  std::vector<std::string> msgstr;

  bool is_plural() const { return !msgid_plural.empty(); }
};

/// A GNU gettext message catalogue (.mo), decoded and validated.
struct MoCatalog {
  std::string name;          // The path or name given to ParseMo, for messages.
  bool big_endian = false;   // Magic 0xde120495 as read little-endian.
  std::string charset;       // As declared by the header ("UTF-8" when there is no header).
  std::string plural_forms;  // The header's Plural-Forms value ('?' for bytes outside printable
                             // ASCII); empty when absent.
  PluralRule plural_rule = PluralRule::Germanic();  // gettext's default when absent.
  std::vector<MoMessage> messages;  // [entry] in file order, without the header entry.
};

/// Limits that keep hostile input from causing unbounded allocation.
// Files larger than this are refused (the largest catalogue on a Debian system is about 2 MiB).
inline constexpr size_t kMaxMoFileBytes = size_t{64} << 20;
// Strings may overlap or be shared between entries; the bytes all entries reference together
// may not exceed this multiple of the file size (plus 1 MiB). Catalogues written by msgfmt
// reference each byte at most once.
inline constexpr size_t kMaxMoStringExpansion = 8;

/// Parses the bytes of a .mo file (format: GNU gettext manual, "The Format of GNU MO Files";
/// either byte order, revision 0 or 1; the hash table and revision-1 system-dependent strings
/// are not needed and are ignored). Strings in a declared charset other than UTF-8 or ASCII are
/// converted with iconv(3). Every problem — truncated data, wrong magic, a count, offset or
/// length past the end, a string without its NUL terminator, invalid UTF-8, an unknown charset,
/// an unparsable Plural-Forms — is an InvalidArgument error whose message starts with `name`.
/// Thread-safe; the result owns copies of everything.
[[nodiscard]] absl::StatusOr<MoCatalog> ParseMo(std::string_view bytes, std::string_view name);

/// Reads and parses the file at `path`; files over kMaxMoFileBytes are refused.
[[nodiscard]] absl::StatusOr<MoCatalog> ReadMoFile(const std::string& path);

/// The bytes of the file at `path` as ReadMoFile reads them: a regular file (a FIFO or device is
/// refused without blocking) of at most kMaxMoFileBytes. Errors name the path.
[[nodiscard]] absl::StatusOr<std::string> ReadMoBytes(const std::string& path);

/// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or values > U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace deepnet::data
