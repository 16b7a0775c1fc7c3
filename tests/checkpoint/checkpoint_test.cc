#include "checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/file_text.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

using testing::ReadText;
using testing::WriteText;

// Same dtype, shape and bytes (NaN payloads and -0.0 included).
void ExpectBitwiseEqual(const torch::Tensor& expected, const torch::Tensor& actual,
                        const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(actual.defined());
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(actual.is_contiguous());
  const torch::Tensor e = expected.contiguous();
  const size_t nbytes = static_cast<size_t>(e.numel()) * e.element_size();
  ASSERT_EQ(static_cast<size_t>(actual.numel()) * actual.element_size(), nbytes);
  if (nbytes > 0) {
    EXPECT_EQ(std::memcmp(e.data_ptr(), actual.data_ptr(), nbytes), 0);
  }
}

std::vector<int64_t> Steps(const std::vector<CheckpointInfo>& infos) {
  std::vector<int64_t> steps;
  for (const CheckpointInfo& info : infos) steps.push_back(info.step);
  return steps;
}

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    std::string templ = (fs::temp_directory_path() / "deepnet_ckpt_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
    dir_ = root_ / "nested" / "ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<CheckpointStore> OpenStore(int keep_last = 3) {
    absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
        CheckpointStore::Open({dir_.string(), keep_last});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // A small checkpoint whose weight encodes the step, so loads can be told apart.
  static Checkpoint Small(int64_t step) {
    Checkpoint ckpt;
    ckpt.step = step;
    ckpt.files["model.bin"] = {{"w", torch::full({4, 3}, static_cast<float>(step))},
                               {"b", torch::arange(5, torch::kInt64)}};
    ckpt.metadata = {{"cursor", step * 10}};
    return ckpt;
  }

  std::string SaveOk(CheckpointStore& store, const Checkpoint& ckpt) {
    absl::StatusOr<std::string> path = store.Save(ckpt);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : "";
  }

  fs::path root_;
  fs::path dir_;
};

TEST(Sha256Test, MatchesStandardVectors) {
  EXPECT_EQ(Sha256Hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, FileDigestMatchesBufferDigestAndMissingFileFails) {
  const fs::path path = fs::temp_directory_path() / ("deepnet_sha_" + std::to_string(::getpid()));
  const std::string data(3 << 20, 'x');  // Larger than one read chunk.
  WriteText(path, data);
  absl::StatusOr<std::string> digest = Sha256File(path.string());
  fs::remove(path);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, Sha256Hex(data.data(), data.size()));
  absl::StatusOr<std::string> missing = Sha256File(path.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path.string()));
}

TEST(CheckpointTest, FindReturnsTensorFromAnyFileOrUndefined) {
  Checkpoint ckpt;
  ckpt.files["a.bin"] = {{"x", torch::ones({2})}};
  ckpt.files["b.bin"] = {{"y", torch::zeros({3})}};
  EXPECT_EQ(ckpt.Find("y").numel(), 3);
  EXPECT_EQ(ckpt.Find("x").numel(), 2);
  EXPECT_FALSE(ckpt.Find("z").defined());
}

TEST_F(CheckpointStoreTest, RoundTripsDtypesAndShapesBitwise) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const torch::Tensor base = torch::randn({4, 6});
  Checkpoint ckpt;
  ckpt.step = 42;
  ckpt.files["model.bin"] = {
      {"f32", torch::randn({3, 5})},
      {"f64", torch::randn({7}, torch::kFloat64)},
      {"bf16", torch::randn({2, 3}).to(torch::kBFloat16)},
      {"f16", torch::randn({5}).to(torch::kFloat16)},
      {"transposed", base.t()},
      {"strided", base.slice(/*dim=*/1, 1, 5, 2)},
      {"scalar", torch::tensor(3.5)},
      {"empty", torch::empty({0, 4})},
      {"special", torch::tensor({std::nanf(""), -0.0f, INFINITY, -INFINITY})},
  };
  ckpt.files["optimizer.bin"] = {
      {"i64", torch::arange(-3, 9, torch::kInt64).reshape({3, 4})},
      {"i32", torch::randint(-1000, 1000, {3, 1, 2}, torch::kInt32)},
      {"u8", torch::randint(0, 256, {9}, torch::kUInt8)},
      {"bool", torch::rand({2, 5}) > 0.5},
      {"i64_scalar", torch::tensor(int64_t{1} << 40)},
  };
  ckpt.files["empty_file.bin"] = {};
  const std::string path = SaveOk(*store, ckpt);
  EXPECT_EQ(path, (dir_ / "step_000000042").string());

  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 42);
  ASSERT_EQ(loaded->files.size(), ckpt.files.size());
  for (const auto& [file, tensors] : ckpt.files) {
    const auto& got = loaded->files.at(file);
    ASSERT_EQ(got.size(), tensors.size()) << file;
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(got[i].first, tensors[i].first);  // Order preserved.
      ExpectBitwiseEqual(tensors[i].second, got[i].second, tensors[i].first);
    }
  }
  EXPECT_EQ(loaded->Find("scalar").dim(), 0);

  // The loaded tensors own their memory: nothing aliases the files or each other.
  torch::Tensor w = loaded->Find("f32");
  w.fill_(0);
  EXPECT_TRUE(torch::equal(CheckpointStore::Load(path)->Find("f32"), ckpt.Find("f32")));
}

TEST_F(CheckpointStoreTest, WritesDocumentedLayoutAndManifest) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Checkpoint ckpt = Small(7);
  ckpt.files["model.bin"].push_back({"h", torch::ones({3}, torch::kFloat16)});
  const fs::path folder = SaveOk(*store, ckpt);
  const auto manifest = nlohmann::json::parse(ReadText(folder / "MANIFEST.json"));
  EXPECT_EQ(manifest.at("format_version"), 2);
  EXPECT_EQ(manifest.at("step"), 7);
  std::set<std::string> listed;
  for (const auto& f : manifest.at("files")) {
    const std::string name = f.at("name");
    listed.insert(name);
    EXPECT_EQ(f.at("size").get<uint64_t>(), fs::file_size(folder / name)) << name;
    EXPECT_EQ(f.at("sha256").get<std::string>(), *Sha256File((folder / name).string())) << name;
  }
  EXPECT_EQ(listed, (std::set<std::string>{"metadata.json", "model.bin"}));
  ASSERT_THAT(manifest.at("tensors"), SizeIs(3));
  const std::string model_bytes = ReadText(folder / "model.bin");
  for (const auto& t : manifest.at("tensors")) {
    const int64_t offset = t.at("offset").get<int64_t>();
    EXPECT_EQ(offset % 64, 0);
    EXPECT_EQ(t.at("file"), "model.bin");
    // Format version 2: each tensor's bytes carry their own SHA-256.
    EXPECT_EQ(t.at("sha256").get<std::string>(),
              Sha256Hex(model_bytes.data() + offset, t.at("nbytes").get<size_t>()))
        << t.at("name");
  }
  const auto& h = manifest.at("tensors")[2];
  EXPECT_EQ(h.at("name"), "h");
  EXPECT_EQ(h.at("dtype"), "float16");
  EXPECT_EQ(h.at("shape"), nlohmann::json::array({3}));
  EXPECT_EQ(h.at("nbytes"), 6);
  EXPECT_EQ(manifest.at("tensors")[1].at("dtype"), "int64");
  EXPECT_EQ(nlohmann::json::parse(ReadText(folder / "metadata.json")).at("step"), 7);
}

TEST_F(CheckpointStoreTest, MetadataRoundTrips) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Checkpoint ckpt = Small(3);
  ckpt.metadata = {{"data", {{"shard", 2}, {"offset", 123456789012}}},
                   {"lr", 2.5e-4},
                   {"langs", {"en", "de", "zh"}},
                   {"note", "ünïcode"}};
  const std::string path = SaveOk(*store, ckpt);
  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->metadata, ckpt.metadata);
}

TEST_F(CheckpointStoreTest, LatestNamesLastSavedAndListIsSortedByStep) {
  auto store = OpenStore(/*keep_last=*/0);
  ASSERT_NE(store, nullptr);
  for (int64_t step : {int64_t{10}, int64_t{1000000000}, int64_t{30}, INT64_MAX}) {
    SaveOk(*store, Small(step));
  }
  SaveOk(*store, Small(20));
  EXPECT_EQ(ReadText(dir_ / "latest"), "step_000000020\n");
  EXPECT_THAT(Steps(store->List()), ElementsAre(10, 20, 30, 1000000000, INT64_MAX));
  absl::StatusOr<Checkpoint> latest = store->LoadLatest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 20);
  EXPECT_EQ(latest->Find("w")[0][0].item<float>(), 20.0f);
}

TEST_F(CheckpointStoreTest, KeepLastDeletesOldestCheckpoints) {
  auto store = OpenStore(/*keep_last=*/2);
  ASSERT_NE(store, nullptr);
  for (int64_t step = 1; step <= 4; ++step) SaveOk(*store, Small(step));
  EXPECT_THAT(Steps(store->List()), ElementsAre(3, 4));
  EXPECT_FALSE(fs::exists(dir_ / "step_000000001"));
  EXPECT_FALSE(fs::exists(dir_ / "step_000000002"));
  // Re-saving an old step keeps the one just written even though it is the oldest.
  SaveOk(*store, Small(2));
  EXPECT_THAT(Steps(store->List()), ElementsAre(2, 4));
  EXPECT_EQ(store->LoadLatest()->step, 2);
}

TEST_F(CheckpointStoreTest, ResavingSameStepReplacesItAndLeavesNoTemporaries) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  SaveOk(*store, Small(5));
  Checkpoint again = Small(5);
  again.files["model.bin"][0].second.fill_(-1.0f);
  SaveOk(*store, again);
  EXPECT_EQ(
      CheckpointStore::Load((dir_ / "step_000000005").string())->Find("w")[1][2].item<float>(),
      -1.0f);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("step_000000005", "latest"));
}

TEST_F(CheckpointStoreTest, FlippedByteIsDetectedAndLoadLatestFallsBack) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  SaveOk(*store, Small(1));
  const fs::path bad = fs::path(SaveOk(*store, Small(2))) / "model.bin";
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5);
    const char c = static_cast<char>(f.get() ^ 0x01);
    f.seekp(5);
    f.put(c);
  }
  absl::StatusOr<Checkpoint> direct = CheckpointStore::Load(bad.parent_path().string());
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(direct.status().message()), HasSubstr(bad.string()));
  EXPECT_THAT(std::string(direct.status().message()), HasSubstr("checksum mismatch"));

  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> latest = store->LoadLatest(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 1);
  ASSERT_THAT(rejected, SizeIs(1));
  EXPECT_THAT(rejected[0], HasSubstr(bad.string()));
  EXPECT_THAT(rejected[0], HasSubstr("checksum mismatch"));
}

TEST_F(CheckpointStoreTest, TruncatedFileIsDetected) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path folder = SaveOk(*store, Small(1));
  fs::resize_file(folder / "model.bin", fs::file_size(folder / "model.bin") - 1);
  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(folder.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr((folder / "model.bin").string()));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("size mismatch"));
  std::vector<std::string> rejected;
  EXPECT_EQ(store->LoadLatest(&rejected).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(rejected, SizeIs(1));
}

TEST_F(CheckpointStoreTest, MissingFileAndUnparsableManifestAreReported) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path folder = SaveOk(*store, Small(1));
  fs::remove(folder / "metadata.json");
  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(folder.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr((folder / "metadata.json").string()));
  WriteText(folder / "MANIFEST.json", "{\"format_version\": 1, \"step\":");
  loaded = CheckpointStore::Load(folder.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr((folder / "MANIFEST.json").string()));
}

// The manifest is the user's file: a listed file must be one in the checkpoint folder, so that
// "../other-job/model.bin" or "/etc/shadow" is refused rather than opened.
TEST_F(CheckpointStoreTest, ManifestFilesOutsideTheFolderAreRejected) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path folder = SaveOk(*store, Small(1));
  const std::string original = ReadText(folder / "MANIFEST.json");
  for (const std::string escape : {"../model.bin", "/etc/shadow", "sub/model.bin", ".."}) {
    auto manifest = nlohmann::json::parse(original);
    const std::string listed = manifest["files"][0]["name"];
    manifest["files"][0]["name"] = escape;
    for (auto& t : manifest["tensors"]) {
      if (t["file"] == listed) t["file"] = escape;
    }
    WriteText(folder / "MANIFEST.json", manifest.dump());
    const absl::Status status = CheckpointStore::Load(folder.string()).status();
    EXPECT_FALSE(status.ok()) << escape;
    EXPECT_THAT(std::string(status.message()), HasSubstr("not a plain file name")) << escape;
  }
}

TEST_F(CheckpointStoreTest, ManifestWithInconsistentTensorTableIsRejected) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path folder = SaveOk(*store, Small(1));
  const std::string original = ReadText(folder / "MANIFEST.json");
  auto manifest = nlohmann::json::parse(original);
  manifest["tensors"][0]["offset"] = 1 << 20;  // Past the end of model.bin.
  WriteText(folder / "MANIFEST.json", manifest.dump());
  EXPECT_THAT(std::string(CheckpointStore::Load(folder.string()).status().message()),
              HasSubstr("out of bounds"));
  manifest = nlohmann::json::parse(original);
  manifest["tensors"][0]["shape"] = {4, 4};  // nbytes no longer numel * 4.
  WriteText(folder / "MANIFEST.json", manifest.dump());
  EXPECT_THAT(std::string(CheckpointStore::Load(folder.string()).status().message()),
              HasSubstr("nbytes"));
}

TEST_F(CheckpointStoreTest, ManifestStepMustMatchFolderName) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const fs::path folder = SaveOk(*store, Small(1));
  const fs::path copy = dir_ / "step_000000002";
  fs::copy(folder, copy);
  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(copy.string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("does not match the folder"));
  // LoadLatest skips the mislabelled copy and takes the real one.
  std::vector<std::string> rejected;
  EXPECT_EQ(store->LoadLatest(&rejected)->step, 1);
  EXPECT_THAT(rejected, SizeIs(0));  // `latest` names step 1, which verifies.
}

TEST_F(CheckpointStoreTest, FolderWithoutManifestIsSkipped) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  SaveOk(*store, Small(1));
  // A torn write: the newest step folder has data but no manifest, and `latest` names it.
  const fs::path torn = dir_ / "step_000000002";
  fs::create_directory(torn);
  WriteText(torn / "model.bin", std::string(128, '\0'));
  WriteText(dir_ / "latest", "step_000000002\n");
  EXPECT_THAT(Steps(store->List()), ElementsAre(1));
  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> latest = store->LoadLatest(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 1);
  ASSERT_THAT(rejected, SizeIs(1));
  EXPECT_THAT(rejected[0], HasSubstr((torn / "MANIFEST.json").string()));
}

TEST_F(CheckpointStoreTest, MissingOrDanglingLatestFallsBackToScanning) {
  auto store = OpenStore(/*keep_last=*/0);
  ASSERT_NE(store, nullptr);
  SaveOk(*store, Small(1));
  SaveOk(*store, Small(3));
  SaveOk(*store, Small(2));
  fs::remove(dir_ / "latest");
  EXPECT_EQ(store->LoadLatest()->step, 3);
  WriteText(dir_ / "latest", "step_000000009\n");
  std::vector<std::string> rejected;
  EXPECT_EQ(store->LoadLatest(&rejected)->step, 3);
  EXPECT_THAT(rejected, SizeIs(0));
}

TEST_F(CheckpointStoreTest, LoadLatestOnEmptyDirIsNotFoundNamingDir) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Checkpoint> latest = store->LoadLatest();
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(latest.status().message()), HasSubstr(dir_.string()));
}

TEST_F(CheckpointStoreTest, StaleTemporariesAreIgnoredAndCleanedOnSave) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  SaveOk(*store, Small(1));
  // A crashed writer (another pid) left a complete-looking folder and a pointer temporary.
  const fs::path stale = dir_ / "step_000000005.tmp-999999999";
  fs::copy(dir_ / "step_000000001", stale);
  WriteText(dir_ / "latest.tmp-999999999", "step_000000005\n");
  const fs::path own = dir_ / ("step_000000006.tmp-" + std::to_string(::getpid()));
  fs::create_directory(own);
  for (const char* garbage : {"step_abc", "step_12", "notes.txt"}) {
    fs::create_directory(dir_ / garbage);
  }
  EXPECT_THAT(Steps(store->List()), ElementsAre(1));
  EXPECT_EQ(store->LoadLatest()->step, 1);

  SaveOk(*store, Small(2));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(dir_ / "latest.tmp-999999999"));
  EXPECT_TRUE(fs::exists(own));  // Belongs to this process.
  for (const char* garbage : {"step_abc", "step_12", "notes.txt"}) {
    EXPECT_TRUE(fs::exists(dir_ / garbage)) << garbage;  // Not ours to delete.
  }
  EXPECT_THAT(Steps(store->List()), ElementsAre(1, 2));
}

TEST_F(CheckpointStoreTest, DuplicateTensorNamesAreRejectedBeforeWriting) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Checkpoint ckpt;
  ckpt.step = 1;
  ckpt.files["model.bin"] = {{"x", torch::ones({2})}};
  ckpt.files["optimizer.bin"] = {{"x", torch::zeros({2})}};
  absl::StatusOr<std::string> saved = store->Save(ckpt);
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("duplicate tensor name 'x'"));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(CheckpointStoreTest, InvalidCheckpointsAreRejected) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Checkpoint bad_file = Small(1);
  bad_file.files["../escape.bin"] = {};
  EXPECT_EQ(store->Save(bad_file).status().code(), absl::StatusCode::kInvalidArgument);
  Checkpoint reserved = Small(1);
  reserved.files["MANIFEST.json"] = {};
  EXPECT_EQ(store->Save(reserved).status().code(), absl::StatusCode::kInvalidArgument);
  Checkpoint undefined = Small(1);
  undefined.files["model.bin"].push_back({"u", torch::Tensor()});
  EXPECT_EQ(store->Save(undefined).status().code(), absl::StatusCode::kInvalidArgument);
  Checkpoint step_conflict = Small(1);
  step_conflict.metadata["step"] = 2;
  EXPECT_EQ(store->Save(step_conflict).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(CheckpointStoreTest, OpenRejectsPathThatIsAFile) {
  const fs::path file = root_ / "file";
  WriteText(file, "x");
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
      CheckpointStore::Open({file.string(), 3});
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(file.string()));
  store = CheckpointStore::Open({(file / "sub").string(), 3});
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr((file / "sub").string()));
  EXPECT_FALSE(CheckpointStore::Open({"", 3}).ok());
}

}  // namespace
}  // namespace deepnet::checkpoint
