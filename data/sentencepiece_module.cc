#include "data/sentencepiece_bridge.h"

// The SentencePiece module (libdeepnet_spm.so): the only binary that links SentencePiece. No
// abseil header may be included here (SentencePiece's header redefines absl::string_view), and
// the module is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): see sentencepiece_bridge.h.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deepnet::data::internal {
namespace {

SpmResult FromSpm(const sentencepiece::util::Status& status) {
  if (status.ok()) return {};
  return {static_cast<int>(status.code()), status.error_message()};
}

// Feeds the sampled sentences to the trainer. value() must return a std::string reference, so
// each sentence is copied into current_ once (a few bytes per sentence, next to training).
class VectorSentenceIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string_view>& sentences)
      : sentences_(sentences) {
    Load();
  }

  // SentenceIterator:
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override {
    ++index_;
    Load();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void Load() {
    if (!done()) current_.assign(sentences_[index_].data(), sentences_[index_].size());
  }

  const std::vector<std::string_view>& sentences_;
  size_t index_ = 0;
  std::string current_;
};

class SpmProcessorImpl final : public SpmProcessor {
 public:
  SpmProcessorImpl();
  ~SpmProcessorImpl() override;
  // SpmProcessor:
  SpmResult LoadFromSerialized(std::string_view serialized) override;
  std::vector<int> Encode(std::string_view text) const override;
  std::string Decode(const std::vector<int>& ids) const override;
  int PieceSize() const override;
  int PieceToId(std::string_view piece) const override;
  const std::string& IdToPiece(int id) const override;
  float GetScore(int id) const override;
  bool IsControl(int id) const override;
  bool IsUnknown(int id) const override;
  int pad_id() const override;
  int bos_id() const override;
  int eos_id() const override;
  int unk_id() const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace

SpmProcessorImpl::SpmProcessorImpl()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SpmProcessorImpl::~SpmProcessorImpl() = default;

SpmResult SpmProcessorImpl::LoadFromSerialized(std::string_view serialized) {
  return FromSpm(processor_->LoadFromSerializedProto(serialized));
}

std::vector<int> SpmProcessorImpl::Encode(std::string_view text) const {
  std::vector<int> ids;
  // Fails only when no model is loaded, which the owner rules out; ids stays empty then.
  processor_->Encode(text, &ids).IgnoreError();
  return ids;
}

std::string SpmProcessorImpl::Decode(const std::vector<int>& ids) const {
  std::string text;
  if (!processor_->Decode(ids, &text).ok()) text.clear();
  return text;
}

int SpmProcessorImpl::PieceSize() const { return processor_->GetPieceSize(); }
int SpmProcessorImpl::PieceToId(std::string_view piece) const { return processor_->PieceToId(piece); }
const std::string& SpmProcessorImpl::IdToPiece(int id) const { return processor_->IdToPiece(id); }
float SpmProcessorImpl::GetScore(int id) const { return processor_->GetScore(id); }
bool SpmProcessorImpl::IsControl(int id) const { return processor_->IsControl(id); }
bool SpmProcessorImpl::IsUnknown(int id) const { return processor_->IsUnknown(id); }
int SpmProcessorImpl::pad_id() const { return processor_->pad_id(); }
int SpmProcessorImpl::bos_id() const { return processor_->bos_id(); }
int SpmProcessorImpl::eos_id() const { return processor_->eos_id(); }
int SpmProcessorImpl::unk_id() const { return processor_->unk_id(); }

SpmResult TrainImpl(const std::vector<std::pair<std::string, std::string>>& flags,
                   const std::vector<std::string_view>& sentences, std::string* serialized_model) {
  const std::unordered_map<std::string, std::string> kwargs(flags.begin(), flags.end());
  VectorSentenceIterator iterator(sentences);
  return FromSpm(sentencepiece::SentencePieceTrainer::Train(kwargs, &iterator, serialized_model));
}

}  // namespace deepnet::data::internal

namespace {

deepnet::data::internal::SpmProcessor* NewProcessor() {
  return new deepnet::data::internal::SpmProcessorImpl();
}

const deepnet::data::internal::SpmModuleApi kApi = {
    deepnet::data::internal::kSpmModuleApiVersion, &NewProcessor,
    &deepnet::data::internal::TrainImpl};

}  // namespace

// The module's one exported entry point, found with dlsym.
extern "C" __attribute__((visibility("default"))) const deepnet::data::internal::SpmModuleApi*
deepnet_spm_module_api() {
  return &kApi;
}
