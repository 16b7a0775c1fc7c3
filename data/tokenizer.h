#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepnet::data {

/// Maps text to token ids and back, with special tokens and target-language tags (`<2de>`).
/// Implementations are immutable after construction: safe for concurrent use.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids of the text only: no tag, no BOS/EOS.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Text of ids; special tokens and language tags are skipped.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t unk_id() const = 0;
  // Id of the tag `<2LANG>`, or nullopt when the vocabulary has no such language.
  virtual std::optional<int32_t> LangTagId(std::string_view lang) const = 0;
  // Languages that have a tag, in id order.
  virtual std::vector<std::string> Languages() const = 0;
};

}  // namespace deepnet::data
