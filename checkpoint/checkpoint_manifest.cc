#include "checkpoint/checkpoint_manifest.h"

#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "storage/checkpoint_folder.h"
#include "storage/folder_entry.h"

namespace deepnet::checkpoint {
namespace {

using json = nlohmann::json;

struct DtypeEntry {
  torch::ScalarType type;
  const char* name;
};
constexpr DtypeEntry kDtypes[] = {
    {torch::kFloat32, "float32"},
    {torch::kFloat64, "float64"},
    {torch::kFloat16, "float16"},
    {torch::kBFloat16, "bfloat16"},
    {torch::kInt64, "int64"},
    {torch::kInt32, "int32"},
    {torch::kInt16, "int16"},
    {torch::kInt8, "int8"},
    {torch::kUInt8, "uint8"},
    {torch::kBool, "bool"},
    {torch::kComplexFloat, "complex64"},
    {torch::kComplexDouble, "complex128"},
};

// Field readers for ParseManifest. They throw; ParseManifest turns that into a Status.
int64_t NonNegative(const json& v, const char* what) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
      v.get<int64_t>() < 0) {
    throw std::runtime_error(absl::StrCat("'", what, "' is not a non-negative integer"));
  }
  return v.get<int64_t>();
}

int64_t NonNegativeField(const json& j, const char* key) { return NonNegative(j.at(key), key); }

const json& ArrayField(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_array()) throw std::runtime_error(absl::StrCat("'", key, "' is not an array"));
  return v;
}

bool IsHexSha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

// `files` maps every listed file name to its size. Version 1 tensors carry no sha256.
CheckpointManifest::Tensor ParseTensor(const json& t, int64_t format_version,
                                       const std::map<std::string, int64_t>& files,
                                       std::set<std::string>* names) {
  CheckpointManifest::Tensor tensor;
  tensor.name = t.at("name").get<std::string>();
  tensor.file = t.at("file").get<std::string>();
  const std::string dtype = t.at("dtype").get<std::string>();
  tensor.offset = NonNegativeField(t, "offset");
  tensor.nbytes = NonNegativeField(t, "nbytes");
  const std::string where = absl::StrCat("tensor '", tensor.name, "': ");
  if (tensor.name.empty()) throw std::runtime_error("empty tensor name");
  if (!names->insert(tensor.name).second) throw std::runtime_error(where + "repeated name");
  if (format_version >= 2) {
    tensor.sha256 = t.at("sha256").get<std::string>();
    if (!IsHexSha256(tensor.sha256)) throw std::runtime_error(where + "malformed sha256");
  }
  const auto file_size = files.find(tensor.file);
  if (file_size == files.end() || tensor.file == kMetadataFileName) {
    throw std::runtime_error(where + "file '" + tensor.file + "' not listed");
  }
  const std::optional<torch::ScalarType> type = DtypeFromName(dtype);
  if (!type) throw std::runtime_error(where + "unknown dtype '" + dtype + "'");
  tensor.dtype = *type;
  int64_t numel = 1;
  for (const json& d : ArrayField(t, "shape")) {
    const int64_t dim = NonNegative(d, "shape");
    if (__builtin_mul_overflow(numel, dim, &numel)) throw std::runtime_error(where + "shape");
    tensor.shape.push_back(dim);
  }
  int64_t expected = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(c10::elementSize(tensor.dtype)),
                             &expected) ||
      expected != tensor.nbytes) {
    throw std::runtime_error(where + "nbytes does not match dtype and shape");
  }
  if (tensor.offset % kTensorAlignment != 0 || tensor.offset > file_size->second ||
      tensor.nbytes > file_size->second - tensor.offset) {
    throw std::runtime_error(where + "offset misaligned or out of bounds of " + tensor.file);
  }
  return tensor;
}

json TensorToJson(const CheckpointManifest::Tensor& t) {
  return {{"name", t.name},     {"file", t.file},     {"dtype", DtypeName(t.dtype)},
          {"shape", t.shape},   {"offset", t.offset}, {"nbytes", t.nbytes},
          {"sha256", t.sha256}};
}

CheckpointManifest::File ParseFile(const json& f) {
  CheckpointManifest::File file;
  file.name = f.at("name").get<std::string>();
  // The reader joins it to the checkpoint folder: it must name a file in that folder.
  if (!storage::IsPlainFileName(file.name)) {
    throw std::runtime_error(absl::StrCat("file '", file.name,
                                          "': not a plain file name (no '/', no '..')"));
  }
  file.size = NonNegativeField(f, "size");
  file.sha256 = f.at("sha256").get<std::string>();
  if (!IsHexSha256(file.sha256)) {
    throw std::runtime_error(absl::StrCat("file '", file.name, "': malformed sha256"));
  }
  return file;
}

}  // namespace

const char* DtypeName(torch::ScalarType type) {
  for (const DtypeEntry& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

std::optional<torch::ScalarType> DtypeFromName(const std::string& name) {
  for (const DtypeEntry& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
}

bool IsSafeFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

bool IsTensorFileName(const std::string& name) {
  return IsSafeFileName(name) && name != storage::kManifestFileName && name != kMetadataFileName &&
         !absl::EndsWith(name, kShardIndexSuffix);
}

// Always writes the current format version: every writer fills the per-tensor sha256.
json ManifestToJson(const CheckpointManifest& manifest) {
  json files = json::array();
  for (const CheckpointManifest::File& f : manifest.files) {
    files.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  json tensors = json::array();
  for (const CheckpointManifest::Tensor& t : manifest.tensors) tensors.push_back(TensorToJson(t));
  return {{"format", "deepnet-checkpoint"},
          {"format_version", kCheckpointFormatVersion},
          {"step", manifest.step},
          {"files", std::move(files)},
          {"tensors", std::move(tensors)}};
}

absl::StatusOr<CheckpointManifest> ParseManifest(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("unparsable manifest ", path));
  }
  try {
    CheckpointManifest m;
    m.format_version = NonNegativeField(j, "format_version");
    if (m.format_version < kOldestReadableFormatVersion ||
        m.format_version > kCheckpointFormatVersion) {
      throw std::runtime_error(absl::StrCat("unsupported format_version ", m.format_version,
                                            " (this build reads ", kOldestReadableFormatVersion,
                                            " to ", kCheckpointFormatVersion, ")"));
    }
    m.step = NonNegativeField(j, "step");
    std::map<std::string, int64_t> file_sizes;
    for (const json& f : ArrayField(j, "files")) {
      const CheckpointManifest::File& file = m.files.emplace_back(ParseFile(f));
      if (!IsSafeFileName(file.name) || file.name == storage::kManifestFileName ||
          !file_sizes.emplace(file.name, file.size).second) {
        throw std::runtime_error(absl::StrCat("bad or repeated file name '", file.name, "'"));
      }
    }
    if (file_sizes.count(kMetadataFileName) == 0) {
      throw std::runtime_error(absl::StrCat(kMetadataFileName, " not listed"));
    }
    std::set<std::string> names;
    for (const json& t : ArrayField(j, "tensors")) {
      m.tensors.push_back(ParseTensor(t, m.format_version, file_sizes, &names));
    }
    return m;
  } catch (const std::exception& e) {  // json::exception included.
    return absl::DataLossError(absl::StrCat("malformed manifest ", path, ": ", e.what()));
  }
}

json ShardIndexToJson(const ShardIndex& index) {
  json tensors = json::array();
  for (const CheckpointManifest::Tensor& t : index.tensors) tensors.push_back(TensorToJson(t));
  return {{"format", "deepnet-checkpoint-shard"},
          {"format_version", kCheckpointFormatVersion},
          {"file", {{"name", index.file.name}, {"size", index.file.size},
                    {"sha256", index.file.sha256}}},
          {"tensors", std::move(tensors)}};
}

absl::StatusOr<ShardIndex> ParseShardIndex(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("unparsable shard index ", path));
  }
  try {
    if (const int64_t v = NonNegativeField(j, "format_version"); v != kCheckpointFormatVersion) {
      throw std::runtime_error(absl::StrCat("unsupported format_version ", v));
    }
    ShardIndex index;
    index.file = ParseFile(j.at("file"));
    if (!IsTensorFileName(index.file.name)) {
      throw std::runtime_error(absl::StrCat("bad shard file name '", index.file.name, "'"));
    }
    const std::map<std::string, int64_t> file_sizes = {{index.file.name, index.file.size}};
    std::set<std::string> names;
    for (const json& t : ArrayField(j, "tensors")) {
      index.tensors.push_back(ParseTensor(t, kCheckpointFormatVersion, file_sizes, &names));
    }
    return index;
  } catch (const std::exception& e) {  // json::exception included.
    return absl::DataLossError(absl::StrCat("malformed shard index ", path, ": ", e.what()));
  }
}

}  // namespace deepnet::checkpoint
