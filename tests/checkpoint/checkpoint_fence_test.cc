// The checkpoint folder's fencing token (storage/checkpoint_fence.h) and the CheckpointStore
// commits it guards: a stale attempt of a job is refused and leaves the folder as it was.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "storage/checkpoint_fence.h"
#include "tests/file_text.h"
#include "tests/temp_dir.h"

namespace deepnet::checkpoint {
namespace {

namespace fs = std::filesystem;
using storage::FenceToken;
using ::testing::HasSubstr;

FenceToken Token(const std::string& job, int64_t attempt) { return FenceToken{job, attempt}; }

Checkpoint Tiny(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.files["model.bin"].emplace_back("w", torch::full({4}, static_cast<float>(step)));
  return c;
}

std::unique_ptr<CheckpointStore> OpenStore(const std::string& dir, const FenceToken& fence,
                                           int keep_last = 0) {
  CheckpointStoreOptions options;
  options.dir = dir;
  options.keep_last = keep_last;
  options.fence = fence;
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store = CheckpointStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// Every entry of the folder (name -> text of `latest`/FENCE, "" for folders), for before/after.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    out[name] = entry.is_regular_file() ? testing::ReadText(entry.path().string()) : "";
  }
  return out;
}

TEST(CheckpointFence, ClaimRecordsTheAttemptAndNewerTakesOver) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path();
  ASSERT_TRUE(storage::ClaimFolder(dir, Token("job-1", 1)).ok());
  absl::StatusOr<std::optional<FenceToken>> recorded = storage::ReadFence(dir);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_TRUE(recorded->has_value());
  EXPECT_EQ(**recorded, Token("job-1", 1));

  EXPECT_TRUE(storage::ClaimFolder(dir, Token("job-1", 1)).ok());  // same attempt: fine
  EXPECT_TRUE(storage::ClaimFolder(dir, Token("job-1", 3)).ok());  // newer takes over
  EXPECT_EQ(**storage::ReadFence(dir), Token("job-1", 3));

  const absl::Status older = storage::ClaimFolder(dir, Token("job-1", 2));
  EXPECT_TRUE(storage::IsFencedOut(older)) << older;
  EXPECT_THAT(std::string(older.message()), HasSubstr("job job-1 attempt 2 is stale"));
  EXPECT_THAT(std::string(older.message()), HasSubstr("job job-1 attempt 3 owns"));
  EXPECT_EQ(**storage::ReadFence(dir), Token("job-1", 3));
}

TEST(CheckpointFence, AnotherJobIsRefusedWithAClearMessage) {
  deepnet::testing::TempDir tmp;
  ASSERT_TRUE(storage::ClaimFolder(tmp.path(), Token("job-a", 1)).ok());
  const absl::Status other = storage::ClaimFolder(tmp.path(), Token("job-b", 7));
  EXPECT_TRUE(storage::IsFencedOut(other)) << other;
  EXPECT_THAT(std::string(other.message()), HasSubstr("belongs to job job-a"));
  EXPECT_THAT(std::string(other.message()), HasSubstr("its own checkpoint.dir"));
  EXPECT_EQ(**storage::ReadFence(tmp.path()), Token("job-a", 1));
}

// After the coordinator lost its database, job ids start again: a new job under an old id is
// another job (its uid differs) and can neither commit into nor take over the old job's folder,
// whatever its attempt (issue 25, item 5).
TEST(CheckpointFence, AReusedJobIdWithAnotherUidIsAnotherJob) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path();
  const FenceToken old_job{"j-000001", 3, "j-000001@1000"};
  ASSERT_TRUE(storage::ClaimFolder(dir, old_job).ok());
  EXPECT_THAT(testing::ReadText(dir + "/FENCE"),
              HasSubstr("deepnet-checkpoint-fence 2\njob j-000001\nuid j-000001@1000\n"));
  EXPECT_EQ(**storage::ReadFence(dir), old_job);
  for (int64_t attempt : {1, 3, 9}) {
    const absl::Status reused =
        storage::ClaimFolder(dir, FenceToken{"j-000001", attempt, "j-000001@2000"});
    EXPECT_TRUE(storage::IsFencedOut(reused)) << reused;
    EXPECT_THAT(std::string(reused.message()), HasSubstr("an earlier job that had the id j-000001"));
  }
  EXPECT_EQ(**storage::ReadFence(dir), old_job);
  // The same job's newer attempt still takes over.
  EXPECT_TRUE(storage::ClaimFolder(dir, FenceToken{"j-000001", 4, "j-000001@1000"}).ok());
}

// A FENCE written by a trainer without a job uid (version 1) still fences by id and attempt, and
// the job's next attempt records its uid.
TEST(CheckpointFence, AVersionOneFenceIsReadAndUpgraded) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path();
  testing::WriteText(dir + "/FENCE", "deepnet-checkpoint-fence 1\njob j-7\nattempt 2\n");
  EXPECT_EQ(**storage::ReadFence(dir), Token("j-7", 2));
  EXPECT_TRUE(storage::IsFencedOut(storage::ClaimFolder(dir, FenceToken{"j-7", 1, "j-7@5"})));
  ASSERT_TRUE(storage::ClaimFolder(dir, FenceToken{"j-7", 3, "j-7@5"}).ok());
  EXPECT_EQ(**storage::ReadFence(dir), (FenceToken{"j-7", 3, "j-7@5"}));
  testing::WriteText(dir + "/FENCE", "deepnet-checkpoint-fence 2\njob j-7\nattempt 2\n");
  EXPECT_TRUE(absl::IsDataLoss(storage::ReadFence(dir).status()));  // v2 without its uid
}

TEST(CheckpointFence, StandaloneRunIsNotFencedAndRecordsNothing) {
  deepnet::testing::TempDir tmp;
  EXPECT_TRUE(storage::ClaimFolder(tmp.path(), FenceToken{}).ok());
  EXPECT_FALSE(storage::ReadFence(tmp.path())->has_value());
  EXPECT_TRUE(fs::is_empty(tmp.path()));  // no lock file either
  ASSERT_TRUE(storage::ClaimFolder(tmp.path(), Token("job-1", 2)).ok());
  EXPECT_TRUE(storage::ClaimFolder(tmp.path(), FenceToken{}).ok());
  EXPECT_EQ(**storage::ReadFence(tmp.path()), Token("job-1", 2));
}

TEST(CheckpointFence, GarbageFenceFileIsAnErrorNamingIt) {
  deepnet::testing::TempDir tmp;
  testing::WriteText(tmp.path() + "/FENCE", "attempt=9\n");
  const absl::Status s = storage::ClaimFolder(tmp.path(), Token("j", 1));
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("/FENCE is not a checkpoint fence"));
  EXPECT_FALSE(storage::IsFencedOut(s));
}

TEST(CheckpointFence, StaleAttemptCommitIsRefusedAndLeavesTheFolderUntouched) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  std::unique_ptr<CheckpointStore> first = OpenStore(dir, Token("job-1", 1));
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Save(Tiny(10)).ok());

  // The coordinator restarted the job: attempt 2 claims the folder when it opens it.
  std::unique_ptr<CheckpointStore> second = OpenStore(dir, Token("job-1", 2));
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->Save(Tiny(10)).ok());  // resumed from 10, saved again
  const std::map<std::string, std::string> before = Snapshot(dir);
  EXPECT_EQ(before.at("latest"), "step_000000010\n");

  // The cut-off attempt 1 goes on training and tries to commit steps 20 and 10.
  for (int64_t step : {20, 10}) {
    absl::StatusOr<std::string> stale = first->Save(Tiny(step));
    ASSERT_FALSE(stale.ok());
    EXPECT_TRUE(storage::IsFencedOut(stale.status())) << stale.status();
    EXPECT_THAT(std::string(stale.status().message()), HasSubstr("attempt 1 is stale"));
    EXPECT_EQ(Snapshot(dir), before) << "step " << step;  // no folder, no temporary, same latest
  }
  // A sharded commit prepared before the claim is refused at the commit, its folder removed.
  std::unique_ptr<CheckpointStore> third_before = OpenStore(dir, Token("job-1", 2));
  absl::StatusOr<std::string> prepared = third_before->PrepareShardedSave(30, "attempt2");
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_TRUE(
      CheckpointStore::WriteShard(*prepared, "model.bin", Tiny(30).files["model.bin"]).ok());
  std::unique_ptr<CheckpointStore> third = OpenStore(dir, Token("job-1", 3));
  const std::map<std::string, std::string> claimed = Snapshot(dir);
  absl::StatusOr<std::string> late =
      third_before->CommitShardedSave(*prepared, 30, nlohmann::json::object(), {"model.bin"});
  EXPECT_TRUE(storage::IsFencedOut(late.status())) << late.status();
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("nothing committed"));
  std::map<std::string, std::string> after = Snapshot(dir);
  EXPECT_EQ(after.count(fs::path(*prepared).filename().string()), 0u);
  after[fs::path(*prepared).filename().string()] = "";
  EXPECT_EQ(after, claimed);

  // The newest attempt commits, and the checkpoint says who wrote it.
  absl::StatusOr<std::string> saved = third->Save(Tiny(40));
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(*saved);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->metadata.at("writer").at("attempt"), 3);
  EXPECT_EQ(loaded->metadata.at("writer").at("job_id"), "job-1");
}

TEST(CheckpointFence, StaleAttemptCannotReopenAndAnotherJobCannotOpen) {
  deepnet::testing::TempDir tmp;
  ASSERT_NE(OpenStore(tmp.path(), Token("job-1", 2)), nullptr);
  CheckpointStoreOptions options;
  options.dir = tmp.path();
  options.fence = Token("job-1", 1);
  absl::StatusOr<std::unique_ptr<CheckpointStore>> stale = CheckpointStore::Open(options);
  EXPECT_TRUE(storage::IsFencedOut(stale.status())) << stale.status();
  options.fence = Token("job-2", 1);
  absl::StatusOr<std::unique_ptr<CheckpointStore>> other = CheckpointStore::Open(options);
  EXPECT_TRUE(storage::IsFencedOut(other.status())) << other.status();
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("belongs to job job-1"));
  // A standalone run (attempt 0) may still use the folder, e.g. to continue by hand.
  options.fence = FenceToken{};
  EXPECT_TRUE(CheckpointStore::Open(options).ok());
}

TEST(CheckpointFence, NoStaleCommitLandsAfterTheNewAttemptClaimed) {
  // Attempt 1 commits in a loop while attempt 2 claims the folder: whatever attempt 1 had
  // committed when the claim returned is all it ever commits.
  for (int round = 0; round < 5; ++round) {
    deepnet::testing::TempDir tmp;
    const std::string dir = tmp.path();
    std::unique_ptr<CheckpointStore> stale = OpenStore(dir, Token("job", 1));
    ASSERT_NE(stale, nullptr);
    std::atomic<int> committed{0};
    absl::Status last;
    std::thread writer([&] {
      for (int64_t step = 1; step < 100000; ++step) {
        absl::StatusOr<std::string> saved = stale->Save(Tiny(step));
        if (!saved.ok()) {
          last = saved.status();
          return;
        }
        ++committed;
      }
    });
    while (committed.load() < 2 + round) std::this_thread::yield();
    std::vector<std::unique_ptr<CheckpointStore>> newer;
    newer.push_back(OpenStore(dir, Token("job", 2)));  // the claim
    ASSERT_NE(newer.back(), nullptr);
    std::map<std::string, std::string> at_claim = Snapshot(dir);
    // A save attempt 1 had begun is refused at its commit and its temporary folder removed.
    for (auto it = at_claim.begin(); it != at_claim.end();) {
      it = it->first.find(".tmp-") != std::string::npos ? at_claim.erase(it) : std::next(it);
    }
    writer.join();
    EXPECT_TRUE(storage::IsFencedOut(last)) << last;
    EXPECT_EQ(Snapshot(dir), at_claim) << "round " << round;
  }
}

TEST(CheckpointFence, ConcurrentAttemptsEndWithTheNewestOwningTheFolder) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path();
  constexpr int kAttempts = 4;
  std::vector<std::thread> threads;
  std::vector<std::set<int64_t>> committed(kAttempts + 1);
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    threads.emplace_back([&, attempt] {
      CheckpointStoreOptions options;
      options.dir = dir;
      options.keep_last = 0;
      options.fence = Token("job", attempt);
      absl::StatusOr<std::unique_ptr<CheckpointStore>> store = CheckpointStore::Open(options);
      if (!store.ok()) {
        EXPECT_TRUE(storage::IsFencedOut(store.status())) << store.status();
        return;
      }
      for (int64_t i = 0; i < 10; ++i) {
        const int64_t step = attempt * 100 + i;
        absl::StatusOr<std::string> saved = (*store)->Save(Tiny(step));
        if (!saved.ok()) {
          EXPECT_TRUE(storage::IsFencedOut(saved.status())) << saved.status();
          return;
        }
        committed[attempt].insert(step);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(**storage::ReadFence(dir), Token("job", kAttempts));
  // Every step folder was committed by the attempt it claims, and every reported commit exists.
  std::set<int64_t> on_disk;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    if (name.rfind("step_", 0) != 0) continue;
    absl::StatusOr<Checkpoint> loaded = CheckpointStore::Load(entry.path().string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->metadata.at("writer").at("attempt").get<int64_t>(), loaded->step / 100);
    on_disk.insert(loaded->step);
  }
  std::set<int64_t> reported;
  for (const auto& steps : committed) reported.insert(steps.begin(), steps.end());
  EXPECT_EQ(on_disk, reported);
  EXPECT_EQ(committed[kAttempts].size(), 10u);  // the newest is never refused
}

TEST(CheckpointResumeOrder, StartsAtTheCheckpointLatestNamesThenOlderOnes) {
  deepnet::testing::TempDir tmp;
  std::unique_ptr<CheckpointStore> store = OpenStore(tmp.path(), FenceToken{});
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE(store->Save(Tiny(step)).ok());
  auto steps = [&] {
    std::vector<int64_t> out;
    for (const CheckpointInfo& info : store->ResumeOrder()) out.push_back(info.step);
    return out;
  };
  EXPECT_EQ(steps(), (std::vector<int64_t>{30, 20, 10}));
  // `latest` not moved past 20 (say the commit of 30 stopped before it): 30 is never resumed.
  testing::WriteText(tmp.path() + "/latest", "step_000000020\n");
  EXPECT_EQ(steps(), (std::vector<int64_t>{20, 10}));
  EXPECT_EQ(store->LoadLatest()->step, 20);
  // A pointer to a missing folder says nothing: newest first.
  testing::WriteText(tmp.path() + "/latest", "step_000000099\n");
  EXPECT_EQ(steps(), (std::vector<int64_t>{30, 20, 10}));
}

// The divergence guard's rollback (train/training_guard.h): `latest` goes back, the newer
// checkpoints leave the folder (and keep_last's count), and a stale attempt changes nothing.
TEST(CheckpointFence, RollBackToMovesLatestAndDropsNewerCheckpointsUnderTheFence) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path();
  std::unique_ptr<CheckpointStore> old_attempt = OpenStore(dir, Token("j", 1), /*keep_last=*/3);
  for (int64_t step : {3, 6, 9}) ASSERT_TRUE(old_attempt->Save(Tiny(step)).ok());
  std::unique_ptr<CheckpointStore> store = OpenStore(dir, Token("j", 2), /*keep_last=*/3);
  // The stale attempt is refused and leaves the folder as it was.
  const auto before = Snapshot(dir);
  absl::StatusOr<std::string> stale = old_attempt->RollBackTo(3);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(storage::IsFencedOut(stale.status())) << stale.status();
  EXPECT_EQ(Snapshot(dir), before);
  // The current one rolls back to 6: step 9 is gone, `latest` names 6.
  absl::StatusOr<std::string> rolled = store->RollBackTo(6);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(*rolled, dir + "/step_000000006");
  EXPECT_EQ(testing::ReadText(dir + "/latest"), "step_000000006\n");
  std::vector<int64_t> steps;
  for (const CheckpointInfo& info : store->List()) steps.push_back(info.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6}));
  // Two newer saves: keep_last 3 counts 3, 6 and the new ones only.
  ASSERT_TRUE(store->Save(Tiny(7)).ok());
  ASSERT_TRUE(store->Save(Tiny(8)).ok());
  steps.clear();
  for (const CheckpointInfo& info : store->List()) steps.push_back(info.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 7, 8}));
  // Not a completed checkpoint: NotFound, nothing changed.
  EXPECT_TRUE(absl::IsNotFound(store->RollBackTo(5).status()));
  EXPECT_EQ(testing::ReadText(dir + "/latest"), "step_000000008\n");
}

}  // namespace
}  // namespace deepnet::checkpoint
