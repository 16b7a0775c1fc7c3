#pragma once

// The clean-up rules that turn gettext messages into sentence pairs (docs/DATA.md, "Clean-up
// rules"). Each rule is a small pure function on UTF-8 text; CleanMessagePair chains them.
// Everything here is stateless and safe for concurrent use except PairDeduper.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace deepnet::data {

using TextPair = std::pair<std::string, std::string>;  // (English source, translation)

/// The corpus locale for a catalogue folder name (the folder above LC_MESSAGES), or nullopt
/// when the folder is English (en, en_*, en@*) or not a locale name. Rules: lower-case language
/// of 2-3 letters, aliases no->nb, mo->ro, iw->he, in->id, ji->yi; the territory is dropped
/// (de_DE->de, pt_PT->pt) except where it names another written standard or script: pt_BR,
/// zh_CN, zh_TW, zh_HK (zh_Hans/zh_SG->zh_CN, zh_Hant->zh_TW, zh_MO->zh_HK), pa_PK, az_IR; a
/// codeset (.UTF-8) is dropped; modifiers naming a script or variety are kept (sr@latin,
/// sr@Latn->sr@latin, be@latin, uz@cyrillic, ca@valencia, sr@ijekavian(latin), tt@iqtelif),
/// any other modifier is dropped.
std::optional<std::string> NormalizeLocale(std::string_view folder);

/// True when `s` holds no letter once placeholders are removed: printf conversions (%s, %d,
/// %1$s, %-5.2f, %%, %(name)s), Qt/KDE %1, brace fields ({0}, {x}), markup tags (<b>, </a>),
/// entities (&amp;), digits, whitespace and punctuation or symbols (ASCII or Unicode). "" is
/// format-only.
bool IsFormatOnly(std::string_view s);

/// True when `s` holds at least one of the placeholders IsFormatOnly skips: a printf conversion,
/// a Qt/KDE %1, a brace field, a markup tag or an entity ("Open %s", "<b>Bold</b>", "{0} files").
bool HasPlaceholder(std::string_view s);

/// Removes keyboard-accelerator markers: CJK-style "(_F)", "(&F)" (with the spaces before it;
/// full-width parentheses too), then the first '&' accelerator ("E&xit", "&File") and the first
/// '_' accelerator ("_File", "Save _As", "E_xit"). A '&' stays in "&&" (KDE's literal '&', or
/// shell syntax in help text), in entities ("&amp;") and between capitals ("AT&T"). An '_'
/// stays when its word looks like an identifier: two or more '_' (__init__, _NET_WM_NAME), or
/// at least two ASCII characters before it in a word that is all upper-case (UID_MIN) or all
/// lower-case (file_name).
std::string StripAccelerators(std::string_view s);

/// Replaces each run of ASCII whitespace and control characters (tab, CR, LF, DEL, ...) with one
/// space and trims both ends, so a result never contains a tab or a line break.
std::string CollapseWhitespace(std::string_view s);

/// True when a multi-line English source is prose wrapped at some width rather than a list of
/// separate lines: some non-blank line ends without sentence punctuation (. ! ? : ;) and the next
/// non-blank line starts with a lower-case ASCII letter ("...you can redistribute it\nand/or").
bool IsWrappedProse(std::string_view source);

/// Splits a multi-line message into line pairs when it is safe: both sides have the same number
/// of '\n'-separated lines, the source is not wrapped prose, and blank lines coincide. Blank
/// line pairs are dropped. Otherwise (or for a single-line source) returns the pair unchanged.
std::vector<TextPair> SplitLinePairs(std::string_view src, std::string_view tgt);

/// What the clean-up did, summed over messages. All counts are pairs unless noted.
struct CleanupStats {
  int64_t messages = 0;        // Message pairs given to CleanMessagePair.
  int64_t split_messages = 0;  // Messages split into two or more line pairs.
  int64_t dropped_empty = 0;   // A side empty after clean-up.
  int64_t dropped_format_only = 0;
  int64_t dropped_identical = 0;  // Translation equal to the source.
  int64_t kept = 0;

  void Add(const CleanupStats& other);
};

/// Applies every rule to one (msgid, msgstr) pair: SplitLinePairs, then per line pair
/// StripAccelerators and CollapseWhitespace on each side, then drops empty, format-only (either
/// side) and identical pairs. Appends what survives to *out and counts into *stats.
void CleanMessagePair(std::string_view src, std::string_view tgt, std::vector<TextPair>* out,
                      CleanupStats* stats);

/// Remembers (src, tgt) pairs to drop repeats within one locale. Not thread-safe.
class PairDeduper {
 public:
  // True the first time a pair is seen.
  bool Insert(std::string_view src, std::string_view tgt);
  void Clear() { seen_.clear(); }

 private:
  std::unordered_set<std::string> seen_;  // src + '\0' + tgt (neither contains NUL).
};

}  // namespace deepnet::data
