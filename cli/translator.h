#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"
#include "model/deepnet.h"
#include "model/search.h"

namespace deepnet::cli {

/// A trained model loaded from a checkpoint, ready to translate. Not thread-safe.
class Translator {
 public:
  /// `path` is a checkpoint folder (holding MANIFEST.json) or a checkpoint.dir whose latest
  /// good checkpoint is used. Errors name the path.
  static absl::StatusOr<std::unique_ptr<Translator>> Open(const std::string& path,
                                                          const std::string& device = "cpu");

  /// Translates each sentence into `to_lang` with beam search (beam_size 1: greedy), in
  /// batches of sentences of similar length; results come back in input order.
  absl::StatusOr<std::vector<std::string>> Translate(const std::vector<std::string>& sentences,
                                                     const std::string& to_lang,
                                                     const model::SearchOptions& options);

  // Sentences decoded together (padded to the longest); 1 decodes one at a time.
  void set_batch_size(int64_t batch_size) { batch_size_ = batch_size; }

  const std::vector<std::string>& languages() const { return languages_; }
  int64_t step() const { return step_; }
  const data::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  Translator() = default;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::vector<std::string> languages_;
  model::DeepNet model_{nullptr};
  torch::Device device_ = torch::kCPU;
  int64_t step_ = 0;
  int64_t batch_size_ = 16;
};

}  // namespace deepnet::cli
