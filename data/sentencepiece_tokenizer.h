#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace deepnet::data {

namespace internal {
class SpmProcessor;
}  // namespace internal

/// A SentencePiece model (see TrainSentencePiece) behind the Tokenizer interface. Ids follow
/// the project's conventions: 0 pad, 1 bos, 2 eos, 3 unk; language tags `<2xx>` are
/// user-defined symbols. Immutable after Load: safe for concurrent use.
///
/// Because tags are user-defined symbols, a literal "<2de>" inside text encodes to the tag id
/// (SentencePiece always matches user-defined symbols); TokenizeCorpus adds tags by id instead.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Reads the .model file at `model_path`. Errors name the path: missing or unreadable file,
  // bytes that are not a SentencePiece model, or special ids other than 0/1/2/3.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& model_path);

  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  // Tokenizer:
  std::vector<int32_t> Encode(std::string_view text) const override;
  // Skips pad/bos/eos/unk, language tags and ids outside the vocabulary.
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override;
  int32_t pad_id() const override { return 0; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t unk_id() const override { return 3; }
  std::optional<int32_t> LangTagId(std::string_view lang) const override;
  std::vector<std::string> Languages() const override;

  // FNV-1a 64 of the serialized model proto (the .model file's bytes), as 16 lowercase hex
  // digits. Token shards record it so they are only ever read with the vocabulary that made
  // them.
  std::string ModelFingerprint() const { return fingerprint_; }

 private:
  SentencePieceTokenizer(std::unique_ptr<internal::SpmProcessor> processor,
                         std::string fingerprint);

  std::unique_ptr<internal::SpmProcessor> processor_;
  std::string fingerprint_;
  // Tags occupy ids [kFirstTagId, kFirstTagId + languages_.size()): SentencePiece gives
  // user-defined symbols the ids right after the special ones, in training order.
  std::vector<std::string> languages_;  // [id - kFirstTagId] -> language
};

/// FNV-1a 64 of `bytes` as 16 lowercase hex digits (the fingerprint scheme above).
std::string Fnv1a64Hex(std::string_view bytes);

}  // namespace deepnet::data
