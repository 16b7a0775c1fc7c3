#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// SentencePiece 0.1.97's public header declares `namespace absl { using std::string_view; }`,
// which clashes with abseil 20220623's own `absl::string_view` class: no translation unit can
// include both. So only sentencepiece_bridge.cc includes SentencePiece, and this header uses
// std types alone; callers turn SpmResult into absl::Status.
namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace deepnet::data::internal {

/// A SentencePiece util::Status in std types. `code` is the canonical status code, which
/// SentencePiece numbers like absl::StatusCode (0 is OK).
struct SpmResult {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

/// A sentencepiece::SentencePieceProcessor behind an interface. The implementation lives in
/// the module libdeepnet_spm.so (data/sentencepiece_module.cc), the only binary that links
/// SentencePiece: Debian's libsentencepiece embeds its own protobuf runtime and exports those
/// symbols, which clash with the system libprotobuf that LibTorch loads (whichever comes first in
/// the global symbol scope breaks the other). The module is dlopen'ed with RTLD_LOCAL |
/// RTLD_DEEPBIND, so SentencePiece resolves its own symbols and nothing else sees them.
/// Const methods are safe for concurrent use.
class SpmProcessor {
 public:
  virtual ~SpmProcessor() = default;
  // Parses a serialized ModelProto (the bytes of a .model file).
  virtual SpmResult LoadFromSerialized(std::string_view serialized) = 0;
  // Ids of `text`; empty when the model is not loaded.
  virtual std::vector<int> Encode(std::string_view text) const = 0;
  // Text of `ids`; every id must be in [0, PieceSize()) (empty string otherwise).
  virtual std::string Decode(const std::vector<int>& ids) const = 0;
  virtual int PieceSize() const = 0;
  // Id of `piece`, or the unknown id when the vocabulary has no such piece.
  virtual int PieceToId(std::string_view piece) const = 0;
  virtual const std::string& IdToPiece(int id) const = 0;
  virtual float GetScore(int id) const = 0;
  virtual bool IsControl(int id) const = 0;
  virtual bool IsUnknown(int id) const = 0;
  virtual int pad_id() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int unk_id() const = 0;
};

/// Entry points of the module, returned by its C function `deepnet_spm_module_api`.
struct SpmModuleApi {
  int version;  // kSpmModuleApiVersion
  SpmProcessor* (*new_processor)();
  SpmResult (*train)(const std::vector<std::pair<std::string, std::string>>& flags,
                     const std::vector<std::string_view>& sentences, std::string* serialized_model);
};
inline constexpr int kSpmModuleApiVersion = 1;

/// A new processor from the module (loaded once, thread-safe); null with *error set when the
/// module cannot be loaded (the message names every path tried). The module is found through
/// $DEEPNET_SPM_MODULE, the build tree, or next to the executable.
std::unique_ptr<SpmProcessor> NewSpmProcessor(SpmResult* error);

/// Runs SentencePieceTrainer::Train with `flags` (SentencePiece flag name -> value, without
/// model_prefix) on `sentences`, fed through its SentenceIterator API (no temporary input
/// file), and returns the serialized model in *serialized_model; writes no file. Blocks.
SpmResult TrainSpm(const std::vector<std::pair<std::string, std::string>>& flags,
                   const std::vector<std::string_view>& sentences, std::string* serialized_model);

}  // namespace deepnet::data::internal
