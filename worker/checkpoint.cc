#include "worker/checkpoint.h"

#include <spdlog/spdlog.h>
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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/checkpoint_manifest.h"
#include "worker/file_util.h"

namespace deepnet::worker {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Tensor bytes are written as they lie in memory; a big-endian host would need byte swaps.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint format is little-endian");

constexpr const char* kManifest = kManifestFileName;
constexpr const char* kMetadata = kMetadataFileName;
constexpr char kLatest[] = "latest";
constexpr char kTmpMarker[] = ".tmp-";

std::string TmpSuffix() { return absl::StrCat(kTmpMarker, static_cast<int64_t>(::getpid())); }

// Pid of the writer that created a temporary entry of ours (`step_N.tmp-<pid>[...]`,
// `latest.tmp-<pid>`); nullopt for names this store never creates.
std::optional<int64_t> TemporaryOwner(absl::string_view name) {
  const size_t pos = name.find(kTmpMarker);
  if (pos == absl::string_view::npos) return {};
  const absl::string_view prefix = name.substr(0, pos);
  if (prefix != kLatest && !ParseStepDirName(prefix)) return {};
  absl::string_view rest = name.substr(pos + std::strlen(kTmpMarker));
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  int64_t pid = 0;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &pid)) return {};
  return pid;
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

absl::Status ValidateCheckpoint(const Checkpoint& ckpt) {
  if (ckpt.step < 0) return absl::InvalidArgumentError(absl::StrCat("negative step ", ckpt.step));
  if (!ckpt.metadata.is_object() && !ckpt.metadata.is_null()) {
    return absl::InvalidArgumentError("checkpoint metadata must be a JSON object");
  }
  if (ckpt.metadata.is_object() && ckpt.metadata.contains("step") &&
      ckpt.metadata.at("step") != json(ckpt.step)) {
    return absl::InvalidArgumentError(absl::StrCat("metadata step ",
                                                   ckpt.metadata.at("step").dump(),
                                                   " differs from checkpoint step ", ckpt.step));
  }
  std::set<std::string> names;
  for (const auto& [file, tensors] : ckpt.files) {
    if (!IsSafeFileName(file) || file == kManifest || file == kMetadata) {
      return absl::InvalidArgumentError(absl::StrCat("invalid checkpoint file name '", file, "'"));
    }
    for (const auto& [name, tensor] : tensors) {
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

absl::Status WriteTensorFile(const fs::path& folder, const std::string& file,
                             const NamedTensors& tensors, CheckpointManifest* manifest) {
  const std::string path = (folder / file).string();
  absl::StatusOr<std::unique_ptr<DurableWriter>> writer = DurableWriter::Create(path);
  if (!writer.ok()) return writer.status();
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t;
    try {  // Device copies can fail (CUDA errors, out of memory).
      t = tensor.detach().to(torch::kCPU).resolve_conj().resolve_neg().contiguous();
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("cannot copy tensor '", name, "' to CPU for ", path, ": ", e.what()));
    }
    if (absl::Status s = (*writer)->PadTo(kTensorAlignment); !s.ok()) return s;
    CheckpointManifest::Tensor& entry = manifest->tensors.emplace_back();
    entry.name = name;
    entry.file = file;
    entry.dtype = t.scalar_type();
    entry.shape = t.sizes().vec();
    entry.offset = static_cast<int64_t>((*writer)->size());
    entry.nbytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (entry.nbytes > 0) {
      absl::Status s = (*writer)->Append(t.data_ptr(), static_cast<size_t>(entry.nbytes));
      if (!s.ok()) return s;
    }
  }
  if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
  manifest->files.push_back(
      {file, static_cast<int64_t>((*writer)->size()), (*writer)->HexDigest()});
  return absl::OkStatus();
}

// Writes every file of `ckpt` into the new folder `tmp`, MANIFEST.json last, all fsynced.
absl::Status WriteCheckpointFolder(const fs::path& tmp, const Checkpoint& ckpt) {
  std::error_code ec;
  if (!fs::create_directory(tmp, ec)) {
    return FsError(ec ? ec : std::make_error_code(std::errc::file_exists), "cannot create",
                   tmp.string());
  }
  CheckpointManifest manifest;
  manifest.step = ckpt.step;
  for (const auto& [file, tensors] : ckpt.files) {
    if (absl::Status s = WriteTensorFile(tmp, file, tensors, &manifest); !s.ok()) return s;
  }
  json metadata = ckpt.metadata.is_object() ? ckpt.metadata : json::object();
  metadata["step"] = ckpt.step;
  const std::string metadata_path = (tmp / kMetadata).string();
  absl::StatusOr<std::string> text = DumpJson(metadata, metadata_path);
  if (!text.ok()) return text.status();
  std::string sha;
  if (absl::Status s = WriteFileDurably(metadata_path, *text, &sha); !s.ok()) return s;
  manifest.files.push_back({kMetadata, static_cast<int64_t>(text->size()), sha});

  const std::string manifest_path = (tmp / kManifest).string();
  text = DumpJson(ManifestToJson(manifest), manifest_path);
  if (!text.ok()) return text.status();
  if (absl::Status s = WriteFileDurably(manifest_path, *text); !s.ok()) return s;
  return FsyncDir(tmp.string());
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
      spdlog::error("[ckpt] could not restore {} from {}", final_path, aside);
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
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(options));
}

absl::StatusOr<std::string> CheckpointStore::Save(const Checkpoint& checkpoint) {
  if (absl::Status s = ValidateCheckpoint(checkpoint); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (checkpoint dir ", dir(), ")"));
  }
  const fs::path dir_path(options_.dir);
  const std::string name = StepDirName(checkpoint.step);
  const std::string final_path = (dir_path / name).string();
  const std::string tmp = final_path + TmpSuffix();
  std::error_code ec;
  fs::remove_all(tmp, ec);  // Left by an earlier failed Save of this process.
  absl::Status s = WriteCheckpointFolder(tmp, checkpoint);
  if (s.ok()) s = CommitFolder(tmp, final_path);
  if (s.ok()) s = FsyncDir(options_.dir);
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  s = ReplaceFileAtomically((dir_path / kLatest).string(), name + "\n", TmpSuffix());
  if (!s.ok()) return s;

  // The checkpoint is committed; failures below only leave extra files and are logged.
  if (options_.keep_last > 0) {
    const std::vector<CheckpointInfo> infos = List();
    int64_t excess = static_cast<int64_t>(infos.size()) - options_.keep_last;
    for (const CheckpointInfo& info : infos) {  // Oldest first.
      if (excess <= 0) break;
      if (info.step == checkpoint.step) continue;
      // Rename first so that a half-deleted folder never looks like a completed checkpoint.
      const std::string doomed = absl::StrCat(info.path, TmpSuffix(), ".del");
      if (absl::Status r = RenamePath(info.path, doomed); !r.ok()) {
        spdlog::warn("[ckpt] cannot delete old checkpoint: {}", r.ToString());
        continue;
      }
      --excess;
      fs::remove_all(doomed, ec);
      if (ec) spdlog::warn("[ckpt] cannot delete {}: {}", doomed, ec.message());
    }
  }
  const int64_t pid = ::getpid();
  for (fs::directory_iterator it(dir_path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int64_t> owner = TemporaryOwner(it->path().filename().string());
    if (!owner || *owner == pid) continue;
    std::error_code remove_ec;
    fs::remove_all(it->path(), remove_ec);
    if (remove_ec) spdlog::warn("[ckpt] cannot remove stale {}", it->path().string());
  }
  return final_path;
}

absl::StatusOr<Checkpoint> CheckpointStore::LoadLatest(std::vector<std::string>* rejected) const {
  const fs::path dir_path(options_.dir);
  int num_rejected = 0;
  auto reject = [&](const absl::Status& s) {
    ++num_rejected;
    spdlog::warn("[ckpt] rejected checkpoint: {}", s.ToString());
    if (rejected != nullptr) rejected->emplace_back(s.message());
  };
  // Steps at or above this were named by `latest` and failed; only older ones may replace it.
  std::optional<int64_t> upper_bound;
  if (absl::StatusOr<std::string> pointer = ReadFileToString((dir_path / kLatest).string());
      pointer.ok()) {
    const std::string name(absl::StripAsciiWhitespace(*pointer));
    const std::optional<int64_t> step = ParseStepDirName(name);
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
  const fs::path folder(path);
  const std::string manifest_path = (folder / kManifest).string();
  absl::StatusOr<std::string> text = ReadFileToString(manifest_path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("missing manifest ", manifest_path));
  }
  if (!text.ok()) return text.status();  // Names the manifest path.
  absl::StatusOr<CheckpointManifest> manifest = ParseManifest(*text, manifest_path);
  if (!manifest.ok()) return manifest.status();
  const fs::path name =
      folder.filename().empty() ? folder.parent_path().filename() : folder.filename();
  // Folders with other names (copies made by hand) are loadable; step folders must agree.
  if (const std::optional<int64_t> step = ParseStepDirName(name.string());
      step && *step != manifest->step) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": step ", manifest->step, " does not match the folder name"));
  }

  std::map<std::string, MappedFile> mapped;
  for (const CheckpointManifest::File& file : manifest->files) {
    const std::string file_path = (folder / file.name).string();
    absl::StatusOr<MappedFile> data = MappedFile::Open(file_path);
    if (!data.ok()) return data.status();
    if (static_cast<int64_t>(data->size()) != file.size) {
      return absl::DataLossError(absl::StrCat(file_path, ": size mismatch (manifest ", file.size,
                                              " bytes, on disk ", data->size(), ")"));
    }
    Sha256 sha;
    sha.Update(data->data(), data->size());
    if (sha.HexDigest() != file.sha256) {
      return absl::DataLossError(absl::StrCat(file_path, ": checksum mismatch"));
    }
    mapped.emplace(file.name, std::move(*data));
  }

  Checkpoint ckpt;
  ckpt.step = manifest->step;
  for (const CheckpointManifest::File& file : manifest->files) {
    if (file.name != kMetadata) ckpt.files[file.name];  // Keeps files without tensors.
  }
  try {
    for (const CheckpointManifest::Tensor& t : manifest->tensors) {
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

  const MappedFile& metadata_file = mapped.at(kMetadata);
  const std::string metadata_path = (folder / kMetadata).string();
  json metadata =
      json::parse(reinterpret_cast<const char*>(metadata_file.data()),
                  reinterpret_cast<const char*>(metadata_file.data()) + metadata_file.size(),
                  nullptr, /*allow_exceptions=*/false);
  if (metadata.is_discarded() || !metadata.is_object() || !metadata.contains("step") ||
      metadata.at("step") != json(ckpt.step)) {
    return absl::DataLossError(
        absl::StrCat(metadata_path, ": not a JSON object with \"step\": ", ckpt.step));
  }
  metadata.erase("step");  // Carried by Checkpoint::step.
  ckpt.metadata = std::move(metadata);
  return ckpt;
}

std::vector<CheckpointInfo> CheckpointStore::List() const {
  std::vector<CheckpointInfo> infos;
  std::error_code ec;
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int64_t> step = ParseStepDirName(it->path().filename().string());
    std::error_code stat_ec;
    // A step folder without a manifest is torn (or half deleted by hand): not completed.
    if (!step || !it->is_directory(stat_ec) ||
        !fs::is_regular_file(it->path() / kManifest, stat_ec)) {
      continue;
    }
    infos.push_back({*step, it->path().string()});
  }
  if (ec) spdlog::warn("[ckpt] cannot list {}: {}", options_.dir, ec.message());
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

}  // namespace deepnet::worker
