#pragma once

#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace deepnet::data {

/// UTF-8 bytes as tokens: ids 0 pad, 1 bos, 2 eos, 3 unk, then one `<2LANG>` tag per language
/// (in the order given), then the 256 byte values. Needs no training, so it serves tests and
/// runs before a SentencePiece model exists. Decode replaces invalid UTF-8 with U+FFFD.
class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(std::vector<std::string> languages);

  // Tokenizer:
  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override;
  int32_t pad_id() const override { return 0; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t unk_id() const override { return 3; }
  std::optional<int32_t> LangTagId(std::string_view lang) const override;
  std::vector<std::string> Languages() const override { return languages_; }

 private:
  std::vector<std::string> languages_;
};

}  // namespace deepnet::data
