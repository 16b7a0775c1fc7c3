// Scoped credentials (issue 25, item 1): trainer credentials good for one rendezvous scope,
// worker tokens good for their own worker names, and the secrets behind them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "coordinator/auth/auth.h"
#include "coordinator/auth/secrets.h"
#include "coordinator/auth/trainer_credentials.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(TrainerCredentialsTest, VerifyReturnsWhatWasMinted) {
  const TrainerCredentials credentials("a-key");
  for (const std::string job : {"j-000001", "job:with:colons", "x"}) {
    absl::StatusOr<TrainerGrant> grant = credentials.Verify(credentials.Mint(job, 7, 12));
    ASSERT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->job_id, job);
    EXPECT_EQ(grant->attempt, 7);
    EXPECT_EQ(grant->rank, 12);
  }
}

TEST(TrainerCredentialsTest, AlteredForgedAndMalformedCredentialsAreRefused) {
  const TrainerCredentials credentials("a-key");
  const std::string good = credentials.Mint("j-1", 1, 0);
  // Each field changed (the MAC no longer matches).
  for (const std::string& altered :
       {std::string("dnt1:j-2:1:0") + good.substr(good.rfind(':')),
        std::string("dnt1:j-1:2:0") + good.substr(good.rfind(':')),
        std::string("dnt1:j-1:1:1") + good.substr(good.rfind(':')),
        good.substr(0, good.size() - 1) + (good.back() == 'a' ? "b" : "a"),
        TrainerCredentials("another-key").Mint("j-1", 1, 0)}) {
    absl::StatusOr<TrainerGrant> grant = credentials.Verify(altered);
    EXPECT_EQ(grant.status().code(), absl::StatusCode::kUnauthenticated) << altered;
  }
  for (const std::string& malformed :
       {std::string(""), std::string("dnt1:"), std::string("dnt1:j:1:mac"),
        std::string("dnt1::1:0:mac"), std::string("dnt1:j:x:0:mac"),
        std::string("worker-token-0123456789")}) {
    absl::StatusOr<TrainerGrant> grant = credentials.Verify(malformed);
    EXPECT_EQ(grant.status().code(), absl::StatusCode::kUnauthenticated) << malformed;
    EXPECT_THAT(grant.status().message(), HasSubstr("invalid trainer credential"));
  }
  EXPECT_TRUE(TrainerCredentials::LooksLikeCredential(good));
  EXPECT_FALSE(TrainerCredentials::LooksLikeCredential("worker-token-0123456789"));
}

TEST(TrainerCredentialsTest, EachCoordinatorDrawsItsOwnKey) {
  absl::StatusOr<std::unique_ptr<TrainerCredentials>> a = TrainerCredentials::Create();
  absl::StatusOr<std::unique_ptr<TrainerCredentials>> b = TrainerCredentials::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string minted = (*a)->Mint("j-1", 1, 0);
  EXPECT_TRUE((*a)->Verify(minted).ok());
  EXPECT_EQ((*b)->Verify(minted).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(SecretsTest, RandomHexIsFreshEachTimeAndComparesInFull) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> secret = RandomHex(16);
    ASSERT_TRUE(secret.ok());
    EXPECT_EQ(secret->size(), 32u);
    EXPECT_EQ(secret->find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(*secret);
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

absl::StatusOr<std::unique_ptr<Authenticator>> Load(const TempDir& dir, const std::string& text) {
  const std::string path = dir / "tokens";
  std::ofstream(path) << text;
  return Authenticator::Load(path);
}

absl::StatusOr<Principal> As(const Authenticator& auth, const std::string& token) {
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  const std::string value = "Bearer " + token;
  metadata.emplace("authorization", value);
  return auth.Authenticate(metadata);
}

TEST(WorkerIdentityTest, AWorkerTokenActsOnlyAsTheWorkersItNames) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth =
      Load(dir,
           "node-a-token-0123456789 node-a worker\n"
           "pool-token-0123456789ab pool worker workers=gpu-*,spare\n"
           "root-token-0123456789ab root admin\n"
           "alice-token-0123456789a alice\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  const Principal node_a = *As(**auth, "node-a-token-0123456789");
  EXPECT_TRUE(MayActAsWorker(node_a, "node-a").ok());
  const absl::Status other = MayActAsWorker(node_a, "node-b");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other.message(), HasSubstr("may not act as worker 'node-b'"));
  EXPECT_FALSE(MayActAsWorker(node_a, "node-a2").ok());

  const Principal pool = *As(**auth, "pool-token-0123456789ab");
  EXPECT_TRUE(MayActAsWorker(pool, "gpu-0").ok());
  EXPECT_TRUE(MayActAsWorker(pool, "gpu-").ok());
  EXPECT_TRUE(MayActAsWorker(pool, "spare").ok());
  EXPECT_FALSE(MayActAsWorker(pool, "pool").ok());  // Its options replace the USER name.
  EXPECT_FALSE(MayActAsWorker(pool, "xgpu-0").ok());
  EXPECT_FALSE(MayActAsWorker(pool, "spare2").ok());

  EXPECT_TRUE(MayActAsWorker(*As(**auth, "root-token-0123456789ab"), "anything").ok());
  EXPECT_FALSE(MayActAsWorker(*As(**auth, "alice-token-0123456789a"), "alice").ok());
}

TEST(WorkerIdentityTest, PatternsMatchWithoutBacktrackingBlowUp) {
  Principal p("pool", Role::kWorker);
  p.worker_names = {"*a*a*a*a*a*a*a*a*a*a*b"};
  EXPECT_FALSE(MayActAsWorker(p, std::string(64, 'a')).ok());
  EXPECT_TRUE(MayActAsWorker(p, std::string(20, 'a') + "b").ok());
  p.worker_names = {"*"};
  EXPECT_TRUE(MayActAsWorker(p, "any-name").ok());
  p.worker_names = {"a*c*e"};
  EXPECT_TRUE(MayActAsWorker(p, "abcde").ok());
  EXPECT_TRUE(MayActAsWorker(p, "ace").ok());
  EXPECT_FALSE(MayActAsWorker(p, "abcdef").ok());
}

TEST(WorkerIdentityTest, BadWorkersOptionsNameTheLine) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> user_with_workers =
      Load(dir, "alice-token-0123456789a alice user workers=a\n");
  EXPECT_EQ(user_with_workers.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(user_with_workers.status().message(), HasSubstr(":1: workers: only a worker token"));
  TempDir dir2;
  absl::StatusOr<std::unique_ptr<Authenticator>> bad_pattern =
      Load(dir2, "pool-token-0123456789ab pool worker workers=ok,bad/name\n");
  EXPECT_EQ(bad_pattern.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_pattern.status().message(), HasSubstr("'bad/name' is not a worker name"));
}

}  // namespace
}  // namespace deepnet::coordinator
