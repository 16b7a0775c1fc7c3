#include "checkpoint/checkpoint_reader.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "checkpoint/durable_file.h"
#include "storage/checkpoint_folder.h"
#include "storage/scoped_fd.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using storage::ScopedFd;

std::string Sha256Of(const void* data, size_t size) {
  Sha256 sha;
  sha.Update(data, size);
  return sha.HexDigest();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& path) {
  const fs::path folder(path);
  const std::string manifest_path = (folder / storage::kManifestFileName).string();
  absl::StatusOr<std::string> text = ReadFileToString(manifest_path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("missing manifest ", manifest_path));
  }
  if (!text.ok()) return text.status();  // Names the manifest path.
  absl::StatusOr<CheckpointManifest> manifest = ParseManifest(*text, manifest_path);
  if (!manifest.ok()) return manifest.status();
  const fs::path name =
      folder.filename().empty() ? folder.parent_path().filename() : folder.filename();
  // Folders with other names (copies made by hand) are readable; step folders must agree.
  if (const std::optional<int64_t> step = storage::ParseStepFolderName(name.string());
      step && *step != manifest->step) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": step ", manifest->step, " does not match the folder name"));
  }

  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->path_ = path;
  reader->manifest_ = std::move(*manifest);
  for (size_t i = 0; i < reader->manifest_.files.size(); ++i) {
    reader->files_.emplace(reader->manifest_.files[i].name, i);
  }
  for (size_t i = 0; i < reader->manifest_.tensors.size(); ++i) {
    reader->index_.emplace(reader->manifest_.tensors[i].name, i);
  }

  // ParseManifest guarantees that metadata.json is listed.
  const CheckpointManifest::File& meta_file =
      reader->manifest_.files[reader->files_.at(kMetadataFileName)];
  const std::string metadata_path = (folder / kMetadataFileName).string();
  absl::StatusOr<std::string> meta_text = ReadFileToString(metadata_path);
  if (absl::IsNotFound(meta_text.status())) {
    return absl::NotFoundError(absl::StrCat("missing ", metadata_path));
  }
  if (!meta_text.ok()) return meta_text.status();
  if (static_cast<int64_t>(meta_text->size()) != meta_file.size) {
    return absl::DataLossError(absl::StrCat(metadata_path, ": size mismatch (manifest ",
                                            meta_file.size, " bytes, on disk ", meta_text->size(),
                                            ")"));
  }
  if (Sha256Of(meta_text->data(), meta_text->size()) != meta_file.sha256) {
    return absl::DataLossError(absl::StrCat(metadata_path, ": checksum mismatch"));
  }
  json metadata = json::parse(*meta_text, nullptr, /*allow_exceptions=*/false);
  if (metadata.is_discarded() || !metadata.is_object() || !metadata.contains("step") ||
      metadata.at("step") != json(reader->manifest_.step)) {
    return absl::DataLossError(
        absl::StrCat(metadata_path, ": not a JSON object with \"step\": ", reader->manifest_.step));
  }
  metadata.erase("step");  // Carried by step().
  reader->metadata_ = std::move(metadata);
  return reader;
}

std::vector<std::string> CheckpointReader::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(manifest_.tensors.size());
  for (const CheckpointManifest::Tensor& t : manifest_.tensors) names.push_back(t.name);
  return names;
}

absl::Status CheckpointReader::VerifyWholeFile(const CheckpointManifest::File& file) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (verified_files_.count(file.name) != 0) return absl::OkStatus();
  const std::string file_path = (fs::path(path_) / file.name).string();
  absl::StatusOr<MappedFile> data = MappedFile::Open(file_path);
  if (!data.ok()) return absl::DataLossError(data.status().message());
  if (static_cast<int64_t>(data->size()) != file.size) {
    return absl::DataLossError(absl::StrCat(file_path, ": size mismatch (manifest ", file.size,
                                            " bytes, on disk ", data->size(), ")"));
  }
  if (Sha256Of(data->data(), data->size()) != file.sha256) {
    return absl::DataLossError(absl::StrCat(file_path, ": checksum mismatch"));
  }
  verified_files_.insert(file.name);
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> CheckpointReader::Read(const std::string& name) const {
  const auto found = index_.find(name);
  if (found == index_.end()) {
    return absl::NotFoundError(absl::StrCat("no tensor '", name, "' in checkpoint ", path_));
  }
  const CheckpointManifest::Tensor& t = manifest_.tensors[found->second];
  const std::string file_path = (fs::path(path_) / t.file).string();
  const bool per_tensor_sha = !t.sha256.empty();
  if (!per_tensor_sha) {
    if (absl::Status s = VerifyWholeFile(manifest_.files[files_.at(t.file)]); !s.ok()) return s;
  }
  torch::Tensor tensor;
  try {
    tensor = torch::empty(t.shape, torch::TensorOptions().dtype(t.dtype));
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate tensor '", name, "' of ", file_path, ": ", e.what()));
  }
  if (t.nbytes > 0) {
    const ScopedFd fd(::open(file_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      // A listed file that cannot be opened is damage to the checkpoint, not an absent tensor.
      return absl::DataLossError(absl::StrCat("cannot open ", file_path, " for tensor '", name,
                                              "': ", std::strerror(errno)));
    }
    auto* out = static_cast<char*>(tensor.data_ptr());
    int64_t done = 0;
    while (done < t.nbytes) {
      const ssize_t n = ::pread(fd.get(), out + done, static_cast<size_t>(t.nbytes - done),
                                static_cast<off_t>(t.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return absl::DataLossError(absl::StrCat("cannot read tensor '", name, "' from ", file_path,
                                                ": ", std::strerror(errno)));
      }
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(file_path, ": tensor '", name,
                                                "' truncated (file ends at byte ", t.offset + done,
                                                ", tensor at ", t.offset, "+", t.nbytes, ")"));
      }
      done += n;
    }
  }
  if (per_tensor_sha && Sha256Of(tensor.data_ptr(), static_cast<size_t>(t.nbytes)) != t.sha256) {
    return absl::DataLossError(absl::StrCat(file_path, ": tensor '", name, "' checksum mismatch"));
  }
  return tensor;
}

absl::StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> CheckpointReader::ReadMany(
    const std::vector<std::string>& names) const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    absl::StatusOr<torch::Tensor> t = Read(name);
    if (!t.ok()) return t.status();
    out.emplace_back(name, std::move(*t));
  }
  return out;
}

}  // namespace deepnet::checkpoint
