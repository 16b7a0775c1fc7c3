#include "checkpoint/checkpoint.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_manifest.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_shard.h"
#include "checkpoint/durable_file.h"
#include "storage/checkpoint_fence.h"
#include "storage/checkpoint_folder.h"
#include "storage/storage_log.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifest = storage::kManifestFileName;
constexpr const char* kMetadata = kMetadataFileName;
constexpr const char* kLatest = storage::kLatestFileName;
constexpr char kTmpMarker[] = ".tmp-";
// Temporary step folders of a save: step_N.tmp-shared-<token>.
constexpr char kSharedMarker[] = "shared-";
constexpr size_t kMaxTokenSize = 64;

std::string PidString() { return std::to_string(static_cast<int64_t>(::getpid())); }
// Suffix of the short-lived entries only this process uses (latest.tmp-<pid>, *.old, *.del).
std::string TmpSuffix() { return absl::StrCat(kTmpMarker, PidString()); }

bool IsValidToken(absl::string_view token) {
  if (token.empty() || token.size() > kMaxTokenSize) return false;
  return std::all_of(token.begin(), token.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string SharedTmpName(int64_t step, const std::string& token) {
  return absl::StrCat(storage::StepFolderName(step), kTmpMarker, kSharedMarker, token);
}

// A temporary entry this store creates: `prefix` is "latest" or a step folder name; `owner` is
// "<pid>" for step_N.tmp-<pid>[...] and latest.tmp-<pid>, "shared-<token>" for a save's folder.
struct Temporary {
  std::string prefix;
  std::string owner;
};

std::optional<Temporary> ParseTemporary(absl::string_view name) {
  const size_t pos = name.find(kTmpMarker);
  if (pos == absl::string_view::npos) return {};
  const absl::string_view prefix = name.substr(0, pos);
  if (prefix != kLatest && !storage::ParseStepFolderName(prefix)) return {};
  absl::string_view rest = name.substr(pos + std::strlen(kTmpMarker));
  if (absl::StartsWith(rest, kSharedMarker)) {
    if (prefix == kLatest || !IsValidToken(rest.substr(std::strlen(kSharedMarker)))) return {};
    return Temporary{std::string(prefix), std::string(rest)};
  }
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  int64_t pid = 0;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &pid)) return {};
  return Temporary{std::string(prefix), std::string(rest.substr(0, digits))};
}

absl::Status FsError(const std::error_code& ec, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(ec.value(), absl::StrCat(what, " ", path));
}

absl::StatusOr<std::string> DumpJson(const json& j, const std::string& path) {
  try {
    return j.dump(2);
  } catch (const json::exception& e) {  // Strings that are not valid UTF-8.
    return absl::InvalidArgumentError(absl::StrCat("cannot serialise ", path, ": ", e.what()));
  }
}

absl::Status ValidateMetadata(const json& metadata, int64_t step) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("negative step ", step));
  if (!metadata.is_object() && !metadata.is_null()) {
    return absl::InvalidArgumentError("checkpoint metadata must be a JSON object");
  }
  if (metadata.is_object() && metadata.contains("step") && metadata.at("step") != json(step)) {
    return absl::InvalidArgumentError(absl::StrCat("metadata step ", metadata.at("step").dump(),
                                                   " differs from checkpoint step ", step));
  }
  return absl::OkStatus();
}

// Everything WriteShard would reject, checked before anything is written.
absl::Status ValidateCheckpoint(const Checkpoint& ckpt) {
  if (absl::Status s = ValidateMetadata(ckpt.metadata, ckpt.step); !s.ok()) return s;
  std::set<std::string> names;
  for (const auto& [file, tensors] : ckpt.files) {
    if (!IsTensorFileName(file)) {
      return absl::InvalidArgumentError(absl::StrCat("invalid checkpoint file name '", file, "'"));
    }
    for (const auto& [name, tensor] : tensors) {
      if (name.empty()) return absl::InvalidArgumentError("empty tensor name in " + file);
      if (!names.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", name, "'"));
      }
      if (!tensor.defined() || tensor.layout() != torch::kStrided ||
          DtypeName(tensor.scalar_type()) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", name, "' in ", file, " is undefined, not dense or of unsupported dtype"));
      }
    }
  }
  return absl::OkStatus();
}

// Turns the collected shards in `tmp` into a complete checkpoint folder: metadata.json and
// MANIFEST.json written and fsynced, shard indices removed, the folder fsynced.
absl::Status FinishFolder(const fs::path& tmp, const json& user_metadata,
                          CheckpointManifest manifest) {
  json metadata = user_metadata.is_object() ? user_metadata : json::object();
  metadata["step"] = manifest.step;
  const std::string metadata_path = (tmp / kMetadata).string();
  absl::StatusOr<std::string> text = DumpJson(metadata, metadata_path);
  if (!text.ok()) return text.status();
  std::string sha;
  if (absl::Status s = WriteFileDurably(metadata_path, *text, &sha); !s.ok()) return s;
  manifest.files.push_back({kMetadata, static_cast<int64_t>(text->size()), sha});

  // The manifest carries everything the indices held; a committed folder holds listed files only.
  for (const CheckpointManifest::File& file : manifest.files) {
    if (file.name == kMetadata) continue;
    std::error_code ec;
    const fs::path index = tmp / (file.name + kShardIndexSuffix);
    fs::remove(index, ec);
    if (ec) return FsError(ec, "cannot remove", index.string());
  }
  const std::string manifest_path = (tmp / kManifest).string();
  text = DumpJson(ManifestToJson(manifest), manifest_path);
  if (!text.ok()) return text.status();
  if (absl::Status s = WriteFileDurably(manifest_path, *text); !s.ok()) return s;
  return storage::FsyncFolder(tmp.string());
}

// Moves the complete folder `tmp` to `final_path`, replacing an earlier save of the same step.
absl::Status CommitFolder(const std::string& tmp, const std::string& final_path) {
  std::error_code ec;
  if (!fs::exists(final_path, ec)) return RenamePath(tmp, final_path);
  // Swap atomically where possible, so that the step never disappears; `tmp` then holds the old.
  absl::Status s = ExchangePaths(tmp, final_path);
  if (s.ok()) {
    fs::remove_all(tmp, ec);
    return absl::OkStatus();
  }
  if (!absl::IsUnimplemented(s)) return s;
  const std::string aside = absl::StrCat(final_path, TmpSuffix(), ".old");
  fs::remove_all(aside, ec);
  if (s = RenamePath(final_path, aside); !s.ok()) return s;
  if (s = RenamePath(tmp, final_path); !s.ok()) {
    if (!RenamePath(aside, final_path).ok()) {
      storage::LogError(absl::StrCat("[ckpt] could not restore ", final_path, " from ", aside));
    }
    return s;
  }
  fs::remove_all(aside, ec);
  return absl::OkStatus();
}

}  // namespace

torch::Tensor Checkpoint::Find(const std::string& name) const {
  for (const auto& [file, tensors] : files) {
    for (const auto& [tensor_name, tensor] : tensors) {
      if (tensor_name == name) return tensor;
    }
  }
  return torch::Tensor();
}

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(
    const CheckpointStoreOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoint dir is empty");
  if (options.keep_last < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_last must be >= 0 for checkpoint dir ", options.dir));
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return FsError(ec, "cannot create checkpoint dir", options.dir);
  if (!fs::is_directory(options.dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint dir is not a directory: ", options.dir));
  }
  // A new attempt records itself before it reads anything: from now on the old one cannot commit.
  if (options.fence.fenced()) {
    if (absl::Status s = storage::ClaimFolder(options.dir, options.fence); !s.ok()) return s;
  }
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(options));
}

absl::StatusOr<std::string> CheckpointStore::Save(const Checkpoint& checkpoint) {
  if (absl::Status s = ValidateCheckpoint(checkpoint); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (checkpoint dir ", dir(), ")"));
  }
  absl::StatusOr<std::string> tmp = PrepareShardedSave(checkpoint.step, PidString());
  if (!tmp.ok()) return tmp.status();
  std::vector<std::string> shard_names;
  for (const auto& [file, tensors] : checkpoint.files) {
    if (absl::Status s = WriteShard(*tmp, file, tensors); !s.ok()) {
      std::error_code ec;
      fs::remove_all(*tmp, ec);
      return ExplainSaveFailure(s);
    }
    shard_names.push_back(file);
  }
  return CommitShardedSave(*tmp, checkpoint.step, checkpoint.metadata, shard_names);
}

absl::StatusOr<std::string> CheckpointStore::PrepareShardedSave(int64_t step,
                                                                const std::string& token) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("negative step ", step));
  if (!IsValidToken(token)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid save token '", token,
                                                   "' (want 1-64 of [A-Za-z0-9_-]) for ", dir()));
  }
  const std::string tmp = (fs::path(options_.dir) / SharedTmpName(step, token)).string();
  // Only the attempt that owns the folder removes anything (a stale one could delete the new
  // attempt's save in progress).
  absl::Status s = storage::RunFenced(options_.dir, options_.fence,
                             [&](const storage::LeaseCheck& still_held) -> absl::Status {
    // A folder of this step left by a crashed run (any token, this one included) is never reused.
    const std::string step_name = storage::StepFolderName(step);
    std::error_code ec;
    for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::optional<Temporary> temp = ParseTemporary(it->path().filename().string());
      if (!temp || temp->prefix != step_name) continue;
      std::error_code remove_ec;
      fs::remove_all(it->path(), remove_ec);
      if (remove_ec) return FsError(remove_ec, "cannot remove stale", it->path().string());
    }
    if (ec) return FsError(ec, "cannot list", options_.dir);
    if (absl::Status held = still_held(); !held.ok()) return held;
    if (!fs::create_directory(tmp, ec)) {
      return FsError(ec ? ec : std::make_error_code(std::errc::file_exists), "cannot create", tmp);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) {
    return storage::WithContext(s, absl::StrCat(" (save of step ", step, ")"));
  }
  return tmp;
}

absl::Status CheckpointStore::WriteShard(
    const std::string& tmp_dir, const std::string& shard_name,
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  const fs::path tmp(tmp_dir);
  const std::string name = (tmp.filename().empty() ? tmp.parent_path() : tmp).filename().string();
  const std::optional<Temporary> temp = ParseTemporary(name);
  // Never write into a committed folder or anything else that PrepareShardedSave did not create.
  if (!temp || !absl::StartsWith(temp->owner, kSharedMarker)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write shard ", shard_name, ": ", tmp_dir,
                     " is not a folder made by PrepareShardedSave"));
  }
  return WriteShardFiles(tmp_dir, shard_name, tensors);
}

absl::StatusOr<std::string> CheckpointStore::CommitShardedSave(
    const std::string& tmp_dir, int64_t step, const nlohmann::json& metadata,
    const std::vector<std::string>& shard_names) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("negative step ", step));
  const fs::path dir_path(options_.dir);
  const fs::path tmp = fs::path(tmp_dir).filename().empty() ? fs::path(tmp_dir).parent_path()
                                                            : fs::path(tmp_dir);
  const fs::path tmp_name = tmp.filename();
  const std::string prefix = absl::StrCat(storage::StepFolderName(step), kTmpMarker, kSharedMarker);
  std::error_code ec;
  if (!absl::StartsWith(tmp_name.string(), prefix) ||
      !IsValidToken(tmp_name.string().substr(prefix.size())) ||
      !fs::equivalent(fs::absolute(tmp, ec).parent_path(), dir_path, ec)) {
    // Not ours to remove.
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot commit ", tmp_dir, ": not a folder made by PrepareShardedSave for step ", step,
        " in ", options_.dir));
  }
  const std::string token = tmp_name.string().substr(prefix.size());
  const std::string name = storage::StepFolderName(step);
  const std::string final_path = (dir_path / name).string();

  absl::Status s = ValidateMetadata(metadata, step);
  if (s.ok()) {
    absl::StatusOr<CheckpointManifest> manifest = CollectShards(tmp_dir, step, shard_names);
    json written = metadata.is_object() ? metadata : json::object();
    // Which attempt wrote the checkpoint, for audits of a folder after a partition.
    if (options_.fence.fenced()) {
      written["writer"] = {{"job_id", options_.fence.job_id}, {"attempt", options_.fence.attempt}};
    }
    s = manifest.ok() ? FinishFolder(tmp, written, std::move(*manifest)) : manifest.status();
  }
  bool renamed = false;
  if (s.ok()) {
    // Check, rename, `latest` and pruning under one hold of the lock: a newer attempt claiming
    // the folder waits until this commit is complete, and after its claim none can start.
    s = storage::RunFenced(options_.dir, options_.fence,
                             [&](const storage::LeaseCheck& still_held) -> absl::Status {
      absl::Status r = CommitFolder(tmp.string(), final_path);
      if (r.ok()) r = storage::FsyncFolder(options_.dir);
      if (!r.ok()) return r;
      renamed = true;
      // A holder stopped past its lease while it renamed leaves `latest` to the new owner.
      if (r = still_held(); !r.ok()) return r;
      r = storage::WriteFileAtomically((dir_path / kLatest).string(), name + "\n", TmpSuffix());
      if (!r.ok()) return r;
      if (r = still_held(); !r.ok()) return r;
      CleanUpAfterCommit(step, token);
      return absl::OkStatus();
    });
  }
  if (!s.ok() && !renamed) {
    fs::remove_all(tmp, ec);
    return storage::WithContext(
        ExplainSaveFailure(s),
        absl::StrCat(" (commit of step ", step, " in ", options_.dir, "; nothing committed)"));
  }
  if (!s.ok()) return s;
  return final_path;
}

void CheckpointStore::CleanUpAfterCommit(int64_t step, const std::string& token) const {
  std::error_code ec;
  if (options_.keep_last > 0) {
    const std::vector<CheckpointInfo> infos = List();
    int64_t excess = static_cast<int64_t>(infos.size()) - options_.keep_last;
    for (const CheckpointInfo& info : infos) {  // Oldest first.
      if (excess <= 0) break;
      if (info.step == step) continue;
      // Rename first so that a half-deleted folder never looks like a completed checkpoint.
      const std::string doomed = absl::StrCat(info.path, TmpSuffix(), ".del");
      if (absl::Status r = RenamePath(info.path, doomed); !r.ok()) {
        storage::LogWarning(absl::StrCat("[ckpt] cannot delete old checkpoint: ", r.ToString()));
        continue;
      }
      --excess;
      fs::remove_all(doomed, ec);
      if (ec) storage::LogWarning(absl::StrCat("[ckpt] cannot delete ", doomed, ": ", ec.message()));
    }
  }
  // Temporaries of other writers are stale: saves into one folder never overlap.
  const std::string own_pid = PidString();
  const std::string own_shared = absl::StrCat(kSharedMarker, token);
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<Temporary> temp = ParseTemporary(it->path().filename().string());
    if (!temp || temp->owner == own_pid || temp->owner == own_shared) continue;
    std::error_code remove_ec;
    fs::remove_all(it->path(), remove_ec);
    if (remove_ec) storage::LogWarning(absl::StrCat("[ckpt] cannot remove stale ", it->path().string()));
  }
}

absl::StatusOr<std::string> CheckpointStore::RollBackTo(int64_t step) {
  const fs::path dir_path(options_.dir);
  const std::string name = storage::StepFolderName(step);
  const std::string target = (dir_path / name).string();
  absl::Status s = storage::RunFenced(options_.dir, options_.fence,
                             [&](const storage::LeaseCheck& still_held) -> absl::Status {
    const std::vector<CheckpointInfo> infos = List();
    if (std::none_of(infos.begin(), infos.end(),
                     [&](const CheckpointInfo& info) { return info.step == step; })) {
      return absl::NotFoundError(absl::StrCat("no completed checkpoint of step ", step));
    }
    // `latest` first: a crash half-way leaves the newer folders, which a resume then skips
    // (ResumeOrder and LoadLatest never go past `latest`).
    absl::Status r =
        storage::WriteFileAtomically((dir_path / kLatest).string(), name + "\n", TmpSuffix());
    if (!r.ok()) return r;
    for (const CheckpointInfo& info : infos) {
      if (info.step <= step) continue;
      if (r = still_held(); !r.ok()) return r;
      // Renamed first so that a half-deleted folder never looks like a completed checkpoint.
      const std::string doomed = absl::StrCat(info.path, TmpSuffix(), ".del");
      if (r = RenamePath(info.path, doomed); !r.ok()) return r;
      std::error_code ec;
      fs::remove_all(doomed, ec);
      if (ec)
        storage::LogWarning(absl::StrCat("[ckpt] cannot delete ", doomed, ": ", ec.message()));
    }
    return storage::FsyncFolder(options_.dir);
  });
  if (!s.ok()) {
    return storage::WithContext(
        s, absl::StrCat(" (rollback to step ", step, " in ", options_.dir, ")"));
  }
  return target;
}

absl::StatusOr<Checkpoint> CheckpointStore::LoadLatest(std::vector<std::string>* rejected) const {
  const fs::path dir_path(options_.dir);
  int num_rejected = 0;
  auto reject = [&](const absl::Status& s) {
    ++num_rejected;
    storage::LogWarning(absl::StrCat("[ckpt] rejected checkpoint: ", s.ToString()));
    if (rejected != nullptr) rejected->emplace_back(s.message());
  };
  // Steps at or above this were named by `latest` and failed; only older ones may replace it.
  std::optional<int64_t> upper_bound;
  if (absl::StatusOr<std::string> pointer = ReadFileToString((dir_path / kLatest).string());
      pointer.ok()) {
    const std::string name(absl::StripAsciiWhitespace(*pointer));
    const std::optional<int64_t> step = storage::ParseStepFolderName(name);
    std::error_code ec;
    // A pointer to a missing folder carries no information: scan everything.
    if (step && fs::is_directory(dir_path / name, ec)) {
      absl::StatusOr<Checkpoint> ckpt = Load((dir_path / name).string());
      if (ckpt.ok()) return ckpt;
      reject(ckpt.status());
      upper_bound = *step;
    }
  }
  const std::vector<CheckpointInfo> infos = List();
  for (auto it = infos.rbegin(); it != infos.rend(); ++it) {
    if (upper_bound && it->step >= *upper_bound) continue;
    absl::StatusOr<Checkpoint> ckpt = Load(it->path);
    if (ckpt.ok()) return ckpt;
    reject(ckpt.status());
  }
  return absl::NotFoundError(
      absl::StrCat("no loadable checkpoint in ", options_.dir, " (", num_rejected, " rejected)"));
}

absl::StatusOr<Checkpoint> CheckpointStore::Load(const std::string& path) {
  // Manifest, folder name and metadata.json are checked by the reader.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(path);
  if (!reader.ok()) return reader.status();
  const CheckpointManifest& manifest = (*reader)->manifest();
  const fs::path folder(path);

  // The SHA-256 of each whole file covers every tensor in it, whatever the format version.
  std::map<std::string, MappedFile> mapped;
  for (const CheckpointManifest::File& file : manifest.files) {
    if (file.name == kMetadata) continue;
    const std::string file_path = (folder / file.name).string();
    absl::StatusOr<MappedFile> data = MappedFile::Open(file_path);
    if (!data.ok()) return data.status();
    if (static_cast<int64_t>(data->size()) != file.size) {
      return absl::DataLossError(absl::StrCat(file_path, ": size mismatch (manifest ", file.size,
                                              " bytes, on disk ", data->size(), ")"));
    }
    if (Sha256Hex(data->data(), data->size()) != file.sha256) {
      return absl::DataLossError(absl::StrCat(file_path, ": checksum mismatch"));
    }
    mapped.emplace(file.name, std::move(*data));
  }

  Checkpoint ckpt;
  ckpt.step = manifest.step;
  ckpt.metadata = (*reader)->metadata();
  for (const CheckpointManifest::File& file : manifest.files) {
    if (file.name != kMetadata) ckpt.files[file.name];  // Keeps files without tensors.
  }
  try {
    for (const CheckpointManifest::Tensor& t : manifest.tensors) {
      // Copies out of the mapping so that the tensor owns its memory.
      torch::Tensor tensor = torch::empty(t.shape, torch::TensorOptions().dtype(t.dtype));
      if (t.nbytes > 0) {
        std::memcpy(tensor.data_ptr(), mapped.at(t.file).data() + t.offset,
                    static_cast<size_t>(t.nbytes));
      }
      ckpt.files[t.file].emplace_back(t.name, std::move(tensor));
    }
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate tensors of ", path, ": ", e.what()));
  }
  return ckpt;
}

absl::Status CheckpointStore::ExplainSaveFailure(absl::Status failure) const {
  if (failure.ok() || !options_.fence.fenced() || storage::IsFencedOut(failure)) return failure;
  absl::StatusOr<std::optional<storage::FenceToken>> owner = storage::ReadFence(options_.dir);
  if (!owner.ok() || !owner->has_value() ||
      ((*owner)->SameJob(options_.fence) && (*owner)->attempt <= options_.fence.attempt)) {
    return failure;
  }
  // Check again under the lock for the refusal's wording (and to record nothing by mistake).
  absl::Status fenced = storage::ClaimFolder(options_.dir, options_.fence);
  return storage::IsFencedOut(fenced)
             ? storage::WithContext(fenced, absl::StrCat(" (", failure.message(), ")"))
             : failure;
}

std::vector<CheckpointInfo> CheckpointStore::ResumeOrder() const {
  std::vector<CheckpointInfo> infos = List();
  std::reverse(infos.begin(), infos.end());  // Newest first.
  absl::StatusOr<std::string> pointer =
      ReadFileToString((fs::path(options_.dir) / kLatest).string());
  if (!pointer.ok()) return infos;
  const std::optional<int64_t> step =
      storage::ParseStepFolderName(absl::StripAsciiWhitespace(*pointer));
  auto named = std::find_if(infos.begin(), infos.end(),
                            [&](const CheckpointInfo& info) { return step && info.step == *step; });
  if (named == infos.end()) return infos;  // A pointer to a missing folder says nothing.
  infos.erase(infos.begin(), named);       // Newer than `latest`: never resumed (LoadLatest).
  return infos;
}

std::vector<CheckpointInfo> CheckpointStore::List() const {
  std::vector<CheckpointInfo> infos;
  std::error_code ec;
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int64_t> step =
        storage::ParseStepFolderName(it->path().filename().string());
    std::error_code stat_ec;
    // A step folder without a manifest is torn (or half deleted by hand): not completed.
    if (!step || !it->is_directory(stat_ec) ||
        !fs::is_regular_file(it->path() / kManifest, stat_ec)) {
      continue;
    }
    infos.push_back({*step, it->path().string()});
  }
  if (ec) storage::LogWarning(absl::StrCat("[ckpt] cannot list ", options_.dir, ": ", ec.message()));
  std::sort(infos.begin(), infos.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return infos;
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");  // "e": O_CLOEXEC.
  if (f == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) sha.Update(buf.data(), n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return sha.HexDigest();
}

std::string Sha256Hex(const void* data, size_t size) {
  Sha256 sha;
  sha.Update(data, size);
  return sha.HexDigest();
}

}  // namespace deepnet::checkpoint
