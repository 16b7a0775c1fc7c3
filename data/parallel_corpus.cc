#include "data/parallel_corpus.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace deepnet::data {
namespace {

// abseil 20220623 here is built with its own absl::string_view (not std::string_view), so the
// parsing below stays in absl::string_view to use the absl string helpers directly.
constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Parses one non-empty line; `where` is "path:line" for the error message.
absl::StatusOr<ParallelExample> ParseLine(absl::string_view line, const std::string& where,
                                          const std::string& src_lang,
                                          const std::string& tgt_lang) {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  ParallelExample example;
  if (fields.size() == 2) {
    if (src_lang.empty() || tgt_lang.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": 2-column line but no source/target language was given for this file"));
    }
    example = {src_lang, tgt_lang, std::string(fields[0]), std::string(fields[1])};
  } else if (fields.size() == 4) {
    if (fields[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": empty source language"));
    }
    if (fields[1].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": empty target language"));
    }
    example = {std::string(fields[0]), std::string(fields[1]), std::string(fields[2]),
               std::string(fields[3])};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected 2 or 4 tab-separated fields, got ", fields.size()));
  }
  if (example.src.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": empty source sentence"));
  }
  if (example.tgt.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": empty target sentence"));
  }
  return example;
}

}  // namespace

absl::StatusOr<std::vector<ParallelExample>> ReadTsvCorpus(const std::string& path,
                                                           const std::string& src_lang,
                                                           const std::string& tgt_lang) {
  errno = 0;
  std::ifstream in(path, std::ios::in | std::ios::binary);
  if (!in.is_open()) {
    // libstdc++ opens through fopen, so errno tells a missing file (NotFound) from the rest.
    const int error = errno != 0 ? errno : ENOENT;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot open: ", strerror(error)));
  }
  std::vector<ParallelExample> examples;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    absl::string_view view = line;
    if (line_number == 1) absl::ConsumePrefix(&view, kUtf8Bom);
    absl::ConsumeSuffix(&view, "\r");  // CRLF files.
    if (view.empty()) continue;
    absl::StatusOr<ParallelExample> example =
        ParseLine(view, absl::StrCat(path, ":", line_number), src_lang, tgt_lang);
    if (!example.ok()) return example.status();
    examples.push_back(*std::move(example));
  }
  if (in.bad()) {
    // E.g. EISDIR when path names a directory, or EIO.
    const int error = errno != 0 ? errno : EIO;
    return absl::ErrnoToStatus(
        error, absl::StrCat(path, ":", line_number + 1, ": read failed: ", strerror(error)));
  }
  return examples;
}

std::vector<TokenizedExample> TokenizeCorpus(const std::vector<ParallelExample>& examples,
                                             const Tokenizer& tokenizer, int64_t max_len,
                                             int64_t* dropped) {
  // A negative max_len is treated like 0 (no limit): no sequence could satisfy it otherwise.
  const bool limited = max_len > 0;
  std::vector<TokenizedExample> out;
  out.reserve(examples.size());
  int64_t num_dropped = 0;
  for (const ParallelExample& example : examples) {
    const std::optional<int32_t> tag = tokenizer.LangTagId(example.tgt_lang);
    if (!tag.has_value()) {
      ++num_dropped;
      continue;
    }
    TokenizedExample tokenized;
    const std::vector<int32_t> src_text = tokenizer.Encode(example.src);
    tokenized.src.reserve(src_text.size() + 2);
    tokenized.src.push_back(*tag);
    tokenized.src.insert(tokenized.src.end(), src_text.begin(), src_text.end());
    tokenized.src.push_back(tokenizer.eos_id());
    tokenized.tgt = tokenizer.Encode(example.tgt);
    tokenized.tgt.push_back(tokenizer.eos_id());
    if (limited && (static_cast<int64_t>(tokenized.src.size()) > max_len ||
                    static_cast<int64_t>(tokenized.tgt.size()) > max_len)) {
      ++num_dropped;
      continue;
    }
    out.push_back(std::move(tokenized));
  }
  if (dropped != nullptr) *dropped = num_dropped;
  return out;
}

}  // namespace deepnet::data
