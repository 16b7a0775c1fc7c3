// Sharded checkpoint saves (several writers, one commit) and CheckpointReader, including loading
// a checkpoint saved by one pipeline layout into another.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_reader.h"
#include "tests/file_text.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

using testing::ReadText;
using testing::WriteText;

void FlipByte(const fs::path& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get() ^ 0x20);
  f.seekp(offset);
  f.put(c);
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

// Same dtype, shape and bytes.
void ExpectShardTensorsBitwiseEqual(const torch::Tensor& expected, const torch::Tensor& actual,
                        const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(actual.defined());
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  const torch::Tensor e = expected.contiguous();
  const size_t nbytes = static_cast<size_t>(e.numel()) * e.element_size();
  ASSERT_EQ(static_cast<size_t>(actual.numel()) * actual.element_size(), nbytes);
  if (nbytes > 0) {
    EXPECT_EQ(std::memcmp(e.data_ptr(), actual.contiguous().data_ptr(), nbytes), 0);
  }
}

// Releases the waiting threads once `count` have arrived; reusable.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

// Parameters and AdamW moments of `layers` transformer layers, global names, step-dependent.
NamedTensors LayerTensors(const std::vector<int>& layers, int64_t step) {
  NamedTensors out;
  for (int layer : layers) {
    const std::string p = "encoder.layers." + std::to_string(layer) + ".";
    const float base = static_cast<float>(step * 100 + layer);
    out.emplace_back(p + "fc1.weight", torch::randn({6, 4}) + base);
    out.emplace_back(p + "fc1.bias", torch::full({6}, base));
    out.emplace_back(p + "norm.weight", torch::randn({4}).to(torch::kBFloat16));
    out.emplace_back("optim.exp_avg." + p + "fc1.weight", torch::randn({6, 4}));
    out.emplace_back("optim.exp_avg_sq." + p + "fc1.weight", torch::rand({6, 4}));
  }
  return out;
}

// Layers [first, first + count).
std::vector<int> Range(int first, int count) {
  std::vector<int> layers;
  for (int i = first; i < first + count; ++i) layers.push_back(i);
  return layers;
}

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    std::string templ = (fs::temp_directory_path() / "deepnet_sharded_ckpt.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    auto store = CheckpointStore::Open({dir_.string(), /*keep_last=*/0});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One thread per shard, as one rank per pipeline stage would: thread 0 prepares, all write
  // after a barrier, thread 0 commits `commit_names` (default: every shard) after another.
  absl::StatusOr<std::string> SaveSharded(
      int64_t step, const std::string& token,
      const std::vector<std::pair<std::string, NamedTensors>>& shards, const json& metadata,
      std::vector<std::string> commit_names = {}) {
    if (commit_names.empty()) {
      for (const auto& shard : shards) commit_names.push_back(shard.first);
    }
    Barrier barrier(static_cast<int>(shards.size()));
    absl::StatusOr<std::string> tmp = absl::UnknownError("not prepared");
    absl::StatusOr<std::string> committed = absl::UnknownError("not committed");
    std::vector<absl::Status> written(shards.size());
    std::vector<std::thread> threads;
    for (size_t rank = 0; rank < shards.size(); ++rank) {
      threads.emplace_back([&, rank] {
        if (rank == 0) tmp = store_->PrepareShardedSave(step, token);
        barrier.Wait();
        if (tmp.ok()) {
          written[rank] =
              CheckpointStore::WriteShard(*tmp, shards[rank].first, shards[rank].second);
        }
        barrier.Wait();
        if (rank == 0 && tmp.ok()) {
          committed = store_->CommitShardedSave(*tmp, step, metadata, commit_names);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    if (!tmp.ok()) return tmp.status();
    for (const absl::Status& s : written) {
      if (!s.ok()) return s;
    }
    return committed;
  }

  // Two stages of four layers each, as stage-000.bin / stage-001.bin.
  std::vector<std::pair<std::string, NamedTensors>> TwoStages(int64_t step) {
    return {{"stage-000.bin", LayerTensors(Range(0, 4), step)},
            {"stage-001.bin", LayerTensors(Range(4, 4), step)}};
  }

  std::unique_ptr<CheckpointReader> OpenReader(const std::string& path) {
    auto reader = CheckpointReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  fs::path dir_;
  std::unique_ptr<CheckpointStore> store_;
};

TEST_F(ShardedCheckpointTest, ThreeWritersCommitOneFolderWhoseManifestListsEveryTensor) {
  std::vector<std::pair<std::string, NamedTensors>> shards = {
      {"stage-000.bin", LayerTensors({0, 1}, 10)},
      {"stage-001.bin", LayerTensors({2}, 10)},
      {"stage-002.bin",
       {{"decoder.out.weight", torch::randn({8, 4}).t()},  // Not contiguous.
        {"rng.cpu", torch::randint(0, 256, {16}, torch::kUInt8)},
        {"scalar", torch::tensor(int64_t{7})},
        {"empty", torch::empty({0, 3})}}}};
  const json metadata = {{"data_stream", {{"position", 1234}}}, {"optimizer_steps", 10}};
  absl::StatusOr<std::string> path = SaveSharded(10, "job-42", shards, metadata);
  ASSERT_TRUE(path.ok()) << path.status();
  const fs::path folder = dir_ / "step_000000010";
  EXPECT_EQ(*path, folder.string());
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("step_000000010", "latest"));
  EXPECT_EQ(ReadText(dir_ / "latest"), "step_000000010\n");
  // Shard indices were folded into the manifest: the folder holds listed files only.
  EXPECT_THAT(Entries(folder),
              UnorderedElementsAre("MANIFEST.json", "metadata.json", "stage-000.bin",
                                   "stage-001.bin", "stage-002.bin"));

  const json manifest = json::parse(ReadText(folder / "MANIFEST.json"));
  EXPECT_EQ(manifest.at("format_version"), 2);
  EXPECT_EQ(manifest.at("step"), 10);
  for (const json& f : manifest.at("files")) {
    const std::string name = f.at("name");
    EXPECT_EQ(f.at("size").get<uint64_t>(), fs::file_size(folder / name)) << name;
    EXPECT_EQ(f.at("sha256").get<std::string>(), *Sha256File((folder / name).string())) << name;
  }
  std::map<std::string, std::pair<std::string, torch::Tensor>> expected;  // name -> (file, t)
  for (const auto& [file, tensors] : shards) {
    for (const auto& [name, t] : tensors) expected[name] = {file, t};
  }
  ASSERT_EQ(manifest.at("tensors").size(), expected.size());
  for (const json& t : manifest.at("tensors")) {
    const std::string name = t.at("name");
    ASSERT_EQ(expected.count(name), 1u) << name;
    EXPECT_EQ(t.at("file"), expected[name].first) << name;
    const torch::Tensor c = expected[name].second.contiguous();
    EXPECT_EQ(t.at("sha256").get<std::string>(),
              Sha256Hex(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size()))
        << name;
  }

  absl::StatusOr<Checkpoint> loaded = store_->LoadLatest();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 10);
  EXPECT_EQ(loaded->metadata, metadata);
  ASSERT_EQ(loaded->files.size(), 3u);
  for (const auto& [name, entry] : expected)
    ExpectShardTensorsBitwiseEqual(entry.second, loaded->Find(name), name);
}

TEST_F(ShardedCheckpointTest, ReaderReadsAnySubsetBitExactly) {
  const auto shards = TwoStages(3);
  const json metadata = {{"cursor", 30}};
  absl::StatusOr<std::string> path = SaveSharded(3, "job", shards, metadata);
  ASSERT_TRUE(path.ok()) << path.status();
  auto reader = OpenReader(*path);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->step(), 3);
  EXPECT_EQ(reader->metadata(), metadata);
  EXPECT_EQ(reader->path(), *path);

  std::vector<std::string> names;
  std::map<std::string, torch::Tensor> originals;
  for (const auto& shard : shards) {
    for (const auto& [name, t] : shard.second) {
      names.push_back(name);
      originals[name] = t;
    }
  }
  EXPECT_EQ(reader->TensorNames(), names);  // Shard order, then order within the shard.
  // Every other tensor, back to front, spanning both files.
  std::vector<std::string> subset;
  for (size_t i = names.size(); i-- > 0;) {
    if (i % 2 == 1) subset.push_back(names[i]);
  }
  for (const std::string& name : subset) {
    EXPECT_TRUE(reader->Has(name));
    absl::StatusOr<torch::Tensor> t = reader->Read(name);
    ASSERT_TRUE(t.ok()) << t.status();
    ExpectShardTensorsBitwiseEqual(originals[name], *t, name);
  }
  absl::StatusOr<NamedTensors> many = reader->ReadMany({names[2], names.back()});
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 2u);
  EXPECT_EQ((*many)[1].first, names.back());
  ExpectShardTensorsBitwiseEqual(originals[names.back()], (*many)[1].second, names.back());

  EXPECT_FALSE(reader->Has("encoder.layers.99.fc1.weight"));
  absl::StatusOr<torch::Tensor> absent = reader->Read("encoder.layers.99.fc1.weight");
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(absent.status().message()), HasSubstr("encoder.layers.99.fc1.weight"));
  EXPECT_EQ(reader->ReadMany({names[0], "nope"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ShardedCheckpointTest, FlippedByteFailsOnlyThatTensorAndLoadLatestFallsBack) {
  ASSERT_TRUE(SaveSharded(1, "job", TwoStages(1), json::object()).ok());
  absl::StatusOr<std::string> path = SaveSharded(2, "job", TwoStages(2), json::object());
  ASSERT_TRUE(path.ok()) << path.status();
  auto reader = OpenReader(*path);
  ASSERT_NE(reader, nullptr);
  const CheckpointManifest::Tensor& victim = reader->manifest().tensors[6];
  const fs::path file = fs::path(*path) / victim.file;
  FlipByte(file, victim.offset + victim.nbytes / 2);

  absl::StatusOr<torch::Tensor> bad = reader->Read(victim.name);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(file.string()));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'" + victim.name + "'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("checksum mismatch"));
  for (const std::string& name : reader->TensorNames()) {  // Same file and the other file.
    if (name != victim.name) {
      EXPECT_TRUE(reader->Read(name).ok()) << name;
    }
  }

  std::vector<std::string> rejected;
  absl::StatusOr<Checkpoint> latest = store_->LoadLatest(&rejected);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 1);
  ASSERT_THAT(rejected, ::testing::SizeIs(1));
  EXPECT_THAT(rejected[0], HasSubstr(file.string()));
  EXPECT_THAT(rejected[0], HasSubstr("checksum mismatch"));
}

TEST_F(ShardedCheckpointTest, TruncatedShardIsDetected) {
  absl::StatusOr<std::string> path = SaveSharded(4, "job", TwoStages(4), json::object());
  ASSERT_TRUE(path.ok()) << path.status();
  const fs::path file = fs::path(*path) / "stage-001.bin";
  fs::resize_file(file, fs::file_size(file) - 1);
  auto reader = OpenReader(*path);
  ASSERT_NE(reader, nullptr);
  const std::string last = reader->TensorNames().back();  // Ends at the end of stage-001.bin.
  absl::StatusOr<torch::Tensor> t = reader->Read(last);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(file.string()));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'" + last + "' truncated"));

  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(*path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(file.string()));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("size mismatch"));
  EXPECT_EQ(store_->LoadLatest().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ShardedCheckpointTest, MissingShardAtCommitIsNamedAndNothingIsCommitted) {
  ASSERT_TRUE(SaveSharded(1, "job", TwoStages(1), json::object()).ok());
  auto shards = TwoStages(2);
  shards.emplace_back("stage-002.bin", NamedTensors{{"extra", torch::ones({2})}});
  // stage-003.bin is expected at commit but no rank wrote it.
  absl::StatusOr<std::string> path =
      SaveSharded(2, "job", shards, json::object(),
                  {"stage-000.bin", "stage-001.bin", "stage-002.bin", "stage-003.bin"});
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("stage-003.bin"));
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("step_000000001", "latest"));
  EXPECT_EQ(ReadText(dir_ / "latest"), "step_000000001\n");
  EXPECT_EQ(store_->LoadLatest()->step, 1);

  // A shard whose index is missing (its rank died between the two files) is incomplete too.
  absl::StatusOr<std::string> tmp = store_->PrepareShardedSave(2, "job");
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  ASSERT_TRUE(CheckpointStore::WriteShard(*tmp, "stage-000.bin", shards[0].second).ok());
  fs::remove(fs::path(*tmp) / "stage-000.bin.index.json");
  path = store_->CommitShardedSave(*tmp, 2, json::object(), {"stage-000.bin"});
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("stage-000.bin.index.json"));
  EXPECT_THAT(store_->List(), ::testing::SizeIs(1));
  EXPECT_FALSE(fs::exists(*tmp));
}

TEST_F(ShardedCheckpointTest, UnlistedShardAndDuplicateNamesAcrossShardsAreRejected) {
  std::vector<std::pair<std::string, NamedTensors>> shards = {
      {"stage-000.bin", {{"a", torch::ones({2})}, {"shared.embed", torch::ones({3})}}},
      {"stage-001.bin", {{"b", torch::ones({2})}, {"shared.embed", torch::zeros({3})}}}};
  absl::StatusOr<std::string> path = SaveSharded(5, "job", shards, json::object());
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(path.status().message());
  EXPECT_THAT(message, HasSubstr("'shared.embed'"));
  EXPECT_THAT(message, HasSubstr("stage-000.bin"));
  EXPECT_THAT(message, HasSubstr("stage-001.bin"));
  EXPECT_TRUE(store_->List().empty());
  EXPECT_TRUE(fs::is_empty(dir_));

  // A shard on disk that the commit does not expect is an error, not silently dropped.
  shards[1].second.pop_back();
  path = SaveSharded(5, "job", shards, json::object(), {"stage-000.bin"});
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("stage-001.bin"));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(ShardedCheckpointTest, StaleTemporaryFoldersOfCrashedRunsAreCleaned) {
  // A crashed run (token "old-job") left folders for step 7 and step 3.
  for (const char* stale :
       {"step_000000007.tmp-shared-old-job", "step_000000003.tmp-shared-old-job"}) {
    fs::create_directory(dir_ / stale);
    WriteText(dir_ / stale / "stage-000.bin", "partial");
  }
  absl::StatusOr<std::string> tmp = store_->PrepareShardedSave(7, "new-job");
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  EXPECT_EQ(*tmp, (dir_ / "step_000000007.tmp-shared-new-job").string());
  EXPECT_TRUE(fs::is_empty(*tmp));
  EXPECT_FALSE(fs::exists(dir_ / "step_000000007.tmp-shared-old-job"));  // Same step: at once.
  EXPECT_TRUE(store_->List().empty());  // Temporaries are never listed.

  // Preparing again under the same token (a restarted job) starts from an empty folder.
  WriteText(fs::path(*tmp) / "stage-000.bin", "half written");
  tmp = store_->PrepareShardedSave(7, "new-job");
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  EXPECT_TRUE(fs::is_empty(*tmp));

  ASSERT_TRUE(CheckpointStore::WriteShard(*tmp, "stage-000.bin", {{"w", torch::ones({2})}}).ok());
  ASSERT_TRUE(store_->CommitShardedSave(*tmp, 7, json::object(), {"stage-000.bin"}).ok());
  // Other steps' leftovers go once a save has committed.
  EXPECT_THAT(Entries(dir_), UnorderedElementsAre("step_000000007", "latest"));
}

TEST_F(ShardedCheckpointTest, InvalidRequestsAreRejectedWithoutSideEffects) {
  EXPECT_EQ(store_->PrepareShardedSave(1, "a/b").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PrepareShardedSave(1, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PrepareShardedSave(-1, "job").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> tmp = store_->PrepareShardedSave(1, "job");
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  const NamedTensors one = {{"w", torch::ones({2})}};
  for (const char* bad : {"MANIFEST.json", "metadata.json", "x.index.json", "../x", ""}) {
    EXPECT_EQ(CheckpointStore::WriteShard(*tmp, bad, one).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(
      CheckpointStore::WriteShard(*tmp, "s.bin", {{"w", torch::ones({1})}, {"w", torch::ones({1})}})
          .code(),
      absl::StatusCode::kInvalidArgument);
  // Only folders made by PrepareShardedSave are written to.
  EXPECT_EQ(CheckpointStore::WriteShard(dir_.string(), "s.bin", one).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(CheckpointStore::WriteShard(*tmp, "s.bin", one).ok());
  // Step that does not match the folder: refused, and the folder is left alone.
  absl::StatusOr<std::string> wrong = store_->CommitShardedSave(*tmp, 2, json::object(), {"s.bin"});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(fs::path(*tmp) / "s.bin"));
  EXPECT_EQ(store_->CommitShardedSave(*tmp, 1, {{"step", 9}}, {"s.bin"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->List().empty());
}

// A run with 2 pipeline stages x 2 data-parallel replicas saves (one writer per stage, names
// global); runs with 1 and with 4 stages each take the layers they own by name.
TEST_F(ShardedCheckpointTest, CheckpointSavedByTwoStagesLoadsIntoOneAndFourStages) {
  constexpr int kLayers = 8;
  const auto shards = TwoStages(9);  // Data-parallel rank 0 of each stage writes.
  absl::StatusOr<std::string> path = SaveSharded(9, "pp2-dp2", shards, {{"cursor", 90}});
  ASSERT_TRUE(path.ok()) << path.status();
  std::map<std::string, torch::Tensor> saved;
  for (const auto& shard : shards) {
    for (const auto& [name, t] : shard.second) saved[name] = t;
  }

  for (int stages : {1, 4}) {
    SCOPED_TRACE("stages=" + std::to_string(stages));
    auto reader = OpenReader(*path);
    ASSERT_NE(reader, nullptr);
    std::map<std::string, torch::Tensor> gathered;
    const int per_stage = kLayers / stages;
    for (int stage = 0; stage < stages; ++stage) {
      std::vector<std::string> wanted;
      for (const auto& [name, t] : LayerTensors(Range(stage * per_stage, per_stage), 0)) {
        wanted.push_back(name);
      }
      absl::StatusOr<NamedTensors> owned = reader->ReadMany(wanted);
      ASSERT_TRUE(owned.ok()) << owned.status();
      for (auto& [name, t] : *owned) {
        EXPECT_TRUE(gathered.emplace(name, t).second) << name << " owned by two stages";
      }
    }
    ASSERT_EQ(gathered.size(), saved.size());
    for (const auto& [name, t] : saved) ExpectShardTensorsBitwiseEqual(t, gathered.at(name), name);
  }
}

TEST_F(ShardedCheckpointTest, ReaderOpenNamesMissingOrDamagedFiles) {
  absl::StatusOr<std::string> path = SaveSharded(6, "job", TwoStages(6), json::object());
  ASSERT_TRUE(path.ok()) << path.status();
  const fs::path folder(*path);
  WriteText(folder / "metadata.json", "{\"step\": 6, \"x\": 1}");
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(*path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(reader.status().message()),
              HasSubstr((folder / "metadata.json").string()));

  json manifest = json::parse(ReadText(folder / "MANIFEST.json"));
  manifest["format_version"] = 3;  // Written by a newer build.
  WriteText(folder / "MANIFEST.json", manifest.dump());
  reader = CheckpointReader::Open(*path);
  EXPECT_THAT(std::string(reader.status().message()), HasSubstr("unsupported format_version 3"));

  fs::remove(folder / "MANIFEST.json");
  reader = CheckpointReader::Open(*path);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(reader.status().message()),
              HasSubstr((folder / "MANIFEST.json").string()));
}

// Format version 1 folders (no per-tensor sha256) stay readable; the whole file is verified.
TEST_F(ShardedCheckpointTest, VersionOneCheckpointIsReadAndVerifiedPerFile) {
  Checkpoint ckpt;
  ckpt.step = 8;
  ckpt.files["model.bin"] = LayerTensors({0, 1}, 8);
  absl::StatusOr<std::string> path = store_->Save(ckpt);
  ASSERT_TRUE(path.ok()) << path.status();
  const fs::path folder(*path);
  json manifest = json::parse(ReadText(folder / "MANIFEST.json"));
  manifest["format_version"] = 1;
  for (json& t : manifest["tensors"]) t.erase("sha256");
  WriteText(folder / "MANIFEST.json", manifest.dump());

  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto reader = OpenReader(*path);
  ASSERT_NE(reader, nullptr);
  for (const auto& [name, t] : ckpt.files["model.bin"]) {
    absl::StatusOr<torch::Tensor> read = reader->Read(name);
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectShardTensorsBitwiseEqual(t, *read, name);
    ExpectShardTensorsBitwiseEqual(t, loaded->Find(name), name);
  }
  FlipByte(folder / "model.bin", manifest["tensors"][0]["offset"].get<int64_t>());
  auto fresh = OpenReader(*path);  // The first reader already verified the file.
  ASSERT_NE(fresh, nullptr);
  absl::StatusOr<torch::Tensor> bad = fresh->Read(ckpt.files["model.bin"].back().first);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("checksum mismatch"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr((folder / "model.bin").string()));
}

}  // namespace
}  // namespace deepnet::checkpoint
