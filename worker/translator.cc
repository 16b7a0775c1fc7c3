#include "worker/translator.h"

#include <torch/torch.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/checkpoint.h"
#include "worker/job_config.h"
#include "worker/training_data.h"

namespace deepnet::worker {

absl::StatusOr<std::unique_ptr<Translator>> Translator::Open(const std::string& path,
                                                             const std::string& device) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return absl::NotFoundError("no checkpoint at " + path);
  absl::StatusOr<Checkpoint> ckpt;
  if (fs::exists(fs::path(path) / "MANIFEST.json", ec)) {
    ckpt = CheckpointStore::Load(path);
  } else {
    CheckpointStoreOptions options;
    options.dir = path;
    auto store = CheckpointStore::Open(options);
    if (!store.ok()) return store.status();
    ckpt = (*store)->LoadLatest();
  }
  if (!ckpt.ok()) return ckpt.status();
  const auto& meta = ckpt->metadata;
  if (!meta.contains("job_config") || !meta.contains("languages")) {
    return absl::InvalidArgumentError("checkpoint in " + path + " has no job_config/languages metadata");
  }
  auto job = ParseJobConfig(meta["job_config"].get<std::string>(), {}, path + " (job_config)");
  if (!job.ok()) return job.status();

  std::unique_ptr<Translator> t(new Translator());
  t->languages_ = meta["languages"].get<std::vector<std::string>>();
  auto tokenizer = MakeTokenizer(job->data.tokenizer, t->languages_);
  if (!tokenizer.ok()) return tokenizer.status();
  t->tokenizer_ = *std::move(tokenizer);
  model::DeepNetConfig mc = job->model;
  mc.vocab_size(t->tokenizer_->vocab_size()).pad_id(t->tokenizer_->pad_id()).dropout(0.0);
  try {
    t->device_ = torch::Device(device);
    t->model_ = model::DeepNet(mc);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what_without_backtrace()));
  }
  torch::NoGradGuard no_grad;
  for (auto& item : t->model_->named_parameters()) {
    torch::Tensor saved = ckpt->Find(item.key());
    if (!saved.defined() || saved.sizes() != item.value().sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": parameter ", item.key(), " missing or mis-shaped"));
    }
    item.value().copy_(saved);
  }
  t->model_->to(t->device_);
  t->model_->eval();
  t->step_ = ckpt->step;
  return t;
}

absl::StatusOr<std::vector<std::string>> Translator::Translate(
    const std::vector<std::string>& sentences, const std::string& to_lang,
    const model::SearchOptions& options) {
  auto tag = tokenizer_->LangTagId(to_lang);
  if (!tag) {
    return absl::InvalidArgumentError(absl::StrCat("--to: unknown language '", to_lang,
                                                   "' (this model knows: ",
                                                   absl::StrJoin(languages_, ", "), ")"));
  }
  model::SearchOptions o = options;
  o.bos_id = tokenizer_->bos_id();
  o.eos_id = tokenizer_->eos_id();
  o.pad_id = tokenizer_->pad_id();
  const int64_t limit = model_->config().max_positions();
  std::vector<std::string> out;
  out.reserve(sentences.size());
  // One sentence at a time keeps memory flat for long inputs; batching is an optimisation
  // for `deepnet eval`.
  for (const auto& sentence : sentences) {
    std::vector<int32_t> ids = {*tag};
    for (int32_t id : tokenizer_->Encode(sentence)) ids.push_back(id);
    ids.push_back(tokenizer_->eos_id());
    if (static_cast<int64_t>(ids.size()) > limit) ids.resize(limit), ids.back() = tokenizer_->eos_id();
    auto src = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong)
                   .unsqueeze(0)
                   .to(device_);
    try {
      auto hyps = o.beam_size <= 1 ? model::GreedySearch(*model_, src, o)
                                   : model::BeamSearch(*model_, src, o);
      out.push_back(tokenizer_->Decode(std::vector<int32_t>(hyps[0].tokens.begin(), hyps[0].tokens.end())));
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("decoding failed: ", e.what_without_backtrace()));
    }
  }
  return out;
}

}  // namespace deepnet::worker
