#include "data/sentencepiece_tokenizer.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/sentencepiece_bridge.h"

namespace deepnet::data {
namespace {

// SentencePiece returns std::vector<int>; Tokenizer speaks int32_t. They are one type here.
static_assert(std::is_same_v<int, int32_t>, "SentencePiece ids are int; Tokenizer ids int32_t");

constexpr int32_t kFirstTagId = 4;  // After pad 0, bos 1, eos 2, unk 3.

// (abseil here has its own absl::string_view, so StrCat takes no std::string_view.)
std::string TagPiece(std::string_view lang) { return std::string("<2").append(lang).append(">"); }

// The language of a `<2LANG>` piece, or nullopt for any other piece.
std::optional<std::string> TagLanguage(const std::string& piece) {
  if (piece.size() < 4 || piece.compare(0, 2, "<2") != 0 || piece.back() != '>') {
    return std::nullopt;
  }
  std::string lang = piece.substr(2, piece.size() - 3);
  if (lang.find_first_of("<>") != std::string::npos) return std::nullopt;
  return lang;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::in | std::ios::binary);
  if (!in.is_open()) {
    const int error = errno != 0 ? errno : ENOENT;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot open"));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    const int error = errno != 0 ? errno : EIO;
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": read failed"));
  }
  return bytes;
}

}  // namespace

std::string Fnv1a64Hex(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis and prime (FNV spec).
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) hex[i] = kHex[hash & 0xF];
  return hex;
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& model_path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(model_path);
  if (!bytes.ok()) return bytes.status();
  internal::SpmResult module_error;
  std::unique_ptr<internal::SpmProcessor> processor = internal::NewSpmProcessor(&module_error);
  if (processor == nullptr) {
    return absl::UnavailableError(absl::StrCat(model_path, ": ", module_error.message));
  }
  if (const internal::SpmResult r = processor->LoadFromSerialized(*bytes); !r.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": not a SentencePiece model: ", r.message));
  }
  if (processor->pad_id() != 0 || processor->bos_id() != 1 || processor->eos_id() != 2 ||
      processor->unk_id() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_path, ": special ids pad/bos/eos/unk are ", processor->pad_id(), "/",
                     processor->bos_id(), "/", processor->eos_id(), "/", processor->unk_id(),
                     ", expected 0/1/2/3 (train with pad_id=0 bos_id=1 eos_id=2 unk_id=3)"));
  }
  auto tokenizer = std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(processor), Fnv1a64Hex(*bytes)));
  return tokenizer;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<internal::SpmProcessor> processor,
                                               std::string fingerprint)
    : processor_(std::move(processor)), fingerprint_(std::move(fingerprint)) {
  const int size = processor_->PieceSize();
  for (int id = kFirstTagId; id < size; ++id) {
    if (processor_->IsControl(id) || processor_->IsUnknown(id)) break;
    std::optional<std::string> lang = TagLanguage(processor_->IdToPiece(id));
    if (!lang.has_value()) break;
    languages_.push_back(*std::move(lang));
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::Encode(std::string_view text) const {
  return processor_->Encode(text);
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  // Specials and tags form the id range [0, first text id); SentencePiece itself would print
  // tags as "<2de>" and unk as " ⁇ ", and reject ids outside the vocabulary.
  const int32_t first_text_id = kFirstTagId + static_cast<int32_t>(languages_.size());
  const int32_t size = vocab_size();
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= first_text_id && id < size) kept.push_back(id);
  }
  return processor_->Decode(kept);
}

int32_t SentencePieceTokenizer::vocab_size() const { return processor_->PieceSize(); }

std::optional<int32_t> SentencePieceTokenizer::LangTagId(std::string_view lang) const {
  if (lang.empty()) return std::nullopt;
  const std::string piece = TagPiece(lang);
  const int32_t id = processor_->PieceToId(piece);
  // PieceToId answers unk for unknown pieces; a match must be that very piece, inside the tag
  // block (an ordinary piece spelled like a tag is not a tag).
  const int32_t tag_end = kFirstTagId + static_cast<int32_t>(languages_.size());
  if (id < kFirstTagId || id >= tag_end || processor_->IdToPiece(id) != piece) {
    return std::nullopt;
  }
  return id;
}

std::vector<std::string> SentencePieceTokenizer::Languages() const { return languages_; }

}  // namespace deepnet::data
