#include "cli/translator.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <unistd.h>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint.h"
#include "data/sentencepiece_tokenizer.h"
#include "job/job_config.h"
#include "train/training_data.h"

namespace deepnet::cli {

absl::StatusOr<std::unique_ptr<Translator>> Translator::Open(const std::string& path,
                                                             const std::string& device) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return absl::NotFoundError("no checkpoint at " + path);
  absl::StatusOr<checkpoint::Checkpoint> ckpt;
  if (fs::exists(fs::path(path) / "MANIFEST.json", ec)) {
    ckpt = checkpoint::CheckpointStore::Load(path);
  } else {
    checkpoint::CheckpointStoreOptions options;
    options.dir = path;
    auto store = checkpoint::CheckpointStore::Open(options);
    if (!store.ok()) return store.status();
    ckpt = (*store)->LoadLatest();
  }
  if (!ckpt.ok()) return ckpt.status();
  const auto& meta = ckpt->metadata;
  if (!meta.contains("job_config") || !meta.contains("languages")) {
    return absl::InvalidArgumentError("checkpoint in " + path + " has no job_config/languages metadata");
  }
  auto job_config =
      job::ParseJobConfig(meta["job_config"].get<std::string>(), {}, path + " (job_config)");
  if (!job_config.ok()) return job_config.status();

  std::unique_ptr<Translator> t(new Translator());
  t->languages_ = meta["languages"].get<std::vector<std::string>>();
  const std::string kind =
      meta.value("tokenizer", job::ToString(job_config->data.tokenizer));
  if (kind == "sentencepiece") {
    torch::Tensor bytes = ckpt->Find("tokenizer.model");
    if (!bytes.defined()) {
      return absl::InvalidArgumentError("checkpoint in " + path + " lacks tokenizer.model");
    }
    // SentencePiece loads from a file: write the embedded model next to nothing we keep.
    const fs::path tmp = fs::temp_directory_path() /
                         ("deepnet-spm-" + std::to_string(::getpid()) + ".model");
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data_ptr()), bytes.numel());
    }
    auto spm = data::SentencePieceTokenizer::Load(tmp.string());
    fs::remove(tmp, ec);
    if (!spm.ok()) return spm.status();
    t->tokenizer_ = *std::move(spm);
  } else {
    auto tokenizer = train::MakeTokenizer(kind, t->languages_, &job_config->data);
    if (!tokenizer.ok()) return tokenizer.status();
    t->tokenizer_ = *std::move(tokenizer);
  }
  model::DeepNetConfig mc = job_config->model;
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
  // Encode every sentence, then decode in batches of similar length (right-padded).
  std::vector<std::vector<int64_t>> sources(sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i) {
    auto& ids = sources[i];
    ids.push_back(*tag);
    for (int32_t id : tokenizer_->Encode(sentences[i])) ids.push_back(id);
    if (static_cast<int64_t>(ids.size()) >= limit) ids.resize(limit - 1);
    ids.push_back(tokenizer_->eos_id());
  }
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::string> out(sentences.size());
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, batch_size_));
  for (size_t start = 0; start < order.size(); start += batch) {
    const size_t end = std::min(order.size(), start + batch);
    size_t longest = 0;
    for (size_t k = start; k < end; ++k) longest = std::max(longest, sources[order[k]].size());
    auto src = torch::full({static_cast<int64_t>(end - start), static_cast<int64_t>(longest)},
                           o.pad_id, torch::kLong);
    for (size_t k = start; k < end; ++k) {
      const auto& ids = sources[order[k]];
      src[k - start].narrow(0, 0, ids.size()).copy_(torch::tensor(ids, torch::kLong));
    }
    try {
      auto hyps = o.beam_size <= 1 ? model::GreedySearch(*model_, src.to(device_), o)
                                   : model::BeamSearch(*model_, src.to(device_), o);
      for (size_t k = start; k < end; ++k) {
        const auto& tokens = hyps[k - start].tokens;
        out[order[k]] = tokenizer_->Decode(std::vector<int32_t>(tokens.begin(), tokens.end()));
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("decoding failed: ", e.what_without_backtrace()));
    }
  }
  return out;
}

}  // namespace deepnet::cli
