#include "checkpoint/checkpoint_shard.h"

#include <torch/torch.h>

#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "checkpoint/durable_file.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;

// Tensor bytes are written as they lie in memory; a big-endian host would need byte swaps.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint format is little-endian");

absl::Status ValidateShardTensors(
    const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty())
      return absl::InvalidArgumentError(absl::StrCat("empty tensor name in ", path));
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate tensor name '", name, "' in ", path));
    }
    if (!tensor.defined() || tensor.layout() != torch::kStrided ||
        DtypeName(tensor.scalar_type()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' in ", path, " is undefined, not dense or of unsupported dtype"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteShardFiles(const std::string& dir, const std::string& shard_name,
                             const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  const std::string path = (fs::path(dir) / shard_name).string();
  if (!IsTensorFileName(shard_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid checkpoint file name '", shard_name, "' (shard in ", dir, ")"));
  }
  if (absl::Status s = ValidateShardTensors(path, tensors); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<DurableWriter>> writer = DurableWriter::Create(path);
  if (!writer.ok()) return writer.status();
  ShardIndex index;
  for (const auto& [name, tensor] : tensors) {
    torch::Tensor t;
    try {  // Device copies can fail (CUDA errors, out of memory).
      t = tensor.detach().to(torch::kCPU).resolve_conj().resolve_neg().contiguous();
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("cannot copy tensor '", name, "' to CPU for ", path, ": ", e.what()));
    }
    if (absl::Status s = (*writer)->PadTo(kTensorAlignment); !s.ok()) return s;
    CheckpointManifest::Tensor& entry = index.tensors.emplace_back();
    entry.name = name;
    entry.file = shard_name;
    entry.dtype = t.scalar_type();
    entry.shape = t.sizes().vec();
    entry.offset = static_cast<int64_t>((*writer)->size());
    entry.nbytes = t.numel() * static_cast<int64_t>(t.element_size());
    Sha256 sha;
    if (entry.nbytes > 0) {
      sha.Update(t.data_ptr(), static_cast<size_t>(entry.nbytes));
      absl::Status s = (*writer)->Append(t.data_ptr(), static_cast<size_t>(entry.nbytes));
      if (!s.ok()) return s;
    }
    entry.sha256 = sha.HexDigest();
  }
  if (absl::Status s = (*writer)->Close(); !s.ok()) return s;
  index.file = {shard_name, static_cast<int64_t>((*writer)->size()), (*writer)->HexDigest()};

  const std::string index_path = path + kShardIndexSuffix;
  std::string text;
  try {
    text = ShardIndexToJson(index).dump(2);
  } catch (const std::exception& e) {  // Tensor names that are not valid UTF-8.
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialise ", index_path, ": ", e.what()));
  }
  if (absl::Status s = WriteFileDurably(index_path, text); !s.ok()) return s;
  return storage::FsyncFolder(dir);
}

absl::StatusOr<CheckpointManifest> CollectShards(const std::string& dir, int64_t step,
                                                 const std::vector<std::string>& shard_names) {
  const fs::path folder(dir);
  std::set<std::string> expected;
  for (const std::string& name : shard_names) {
    if (!IsTensorFileName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid shard name '", name, "' for commit of ", dir));
    }
    if (!expected.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard '", name, "' listed twice for commit of ", dir));
    }
    expected.insert(name + kShardIndexSuffix);
  }
  std::error_code ec;
  for (const std::string& name : shard_names) {
    for (const std::string& file : {name, name + kShardIndexSuffix}) {
      if (!fs::is_regular_file(folder / file, ec)) {
        return absl::NotFoundError(absl::StrCat(
            "shard '", name, "' is incomplete: ", (folder / file).string(), " missing"));
      }
    }
  }
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (expected.count(it->path().filename().string()) == 0) {
      return absl::FailedPreconditionError(absl::StrCat("unexpected file ", it->path().string(),
                                                        " (not among the ", shard_names.size(),
                                                        " shards to commit)"));
    }
  }
  if (ec) return absl::ErrnoToStatus(ec.value(), absl::StrCat("cannot list ", dir));

  CheckpointManifest manifest;
  manifest.step = step;
  std::map<std::string, std::string> owner;  // tensor name -> shard
  for (const std::string& name : shard_names) {
    const std::string index_path = (folder / name).string() + kShardIndexSuffix;
    absl::StatusOr<std::string> text = ReadFileToString(index_path);
    if (!text.ok()) return text.status();
    absl::StatusOr<ShardIndex> index = ParseShardIndex(*text, index_path);
    if (!index.ok()) return index.status();
    if (index->file.name != name) {
      return absl::DataLossError(
          absl::StrCat(index_path, ": describes '", index->file.name, "', not '", name, "'"));
    }
    const uintmax_t size = fs::file_size(folder / name, ec);
    if (ec)
      return absl::ErrnoToStatus(ec.value(),
                                 absl::StrCat("cannot stat ", (folder / name).string()));
    if (static_cast<int64_t>(size) != index->file.size) {
      return absl::DataLossError(absl::StrCat((folder / name).string(), ": size mismatch (index ",
                                              index->file.size, " bytes, on disk ", size, ")"));
    }
    for (CheckpointManifest::Tensor& t : index->tensors) {
      const auto [it, inserted] = owner.emplace(t.name, name);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' is in both shard '",
                                                       it->second, "' and shard '", name, "'"));
      }
      manifest.tensors.push_back(std::move(t));
    }
    manifest.files.push_back(std::move(index->file));
  }
  return manifest;
}

}  // namespace deepnet::checkpoint
