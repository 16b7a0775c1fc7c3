#include "comm/grpc_store.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator_factory.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/sentencepiece_training.h"
#include "tests/comm/rendezvous_test_server.h"
#include "tests/loopback.h"
#ifdef DEEPNET_HAVE_GLOO
#include "comm/gloo_communicator.h"
#endif

namespace deepnet::comm {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr auto kLiveness = std::chrono::seconds(60);

std::vector<uint8_t> Bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string ErrorText(const std::function<void()>& call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}


// The coordinator's Rendezvous service on 127.0.0.1 at a port the OS picks, with the
// scope (job "job-g", attempt 1) open.
class GrpcStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_TRUE(server_.OpenAttempt("job-g", 1).ok());
    address_ = server_.address();
  }
  void TearDown() override { StopServer(); }

  void StopServer() { server_.Stop(); }

  GrpcStoreOptions Options(int attempt = 1) const {
    GrpcStoreOptions options;
    options.address = address_;
    options.job_id = "job-g";
    options.attempt = attempt;
    options.timeout = milliseconds(30000);
    options.rpc_timeout = milliseconds(10000);
    return options;
  }

  c10::intrusive_ptr<GrpcStore> MustCreate(const GrpcStoreOptions& options) {
    absl::StatusOr<c10::intrusive_ptr<GrpcStore>> store = GrpcStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *store : c10::intrusive_ptr<GrpcStore>();
  }

  deepnet::testing::RendezvousTestServer server_;
  coordinator::RendezvousStore& rendezvous_ = server_.store();
  std::string address_;
};

TEST_F(GrpcStoreTest, ImplementsTheC10dStoreOperations) {
  c10::intrusive_ptr<GrpcStore> store = MustCreate(Options());
  ASSERT_TRUE(store);
  store->set("a", Bytes("alpha"));
  EXPECT_EQ(store->get("a"), Bytes("alpha"));
  EXPECT_EQ(store->add("n", 3), 3);
  EXPECT_EQ(store->add("n", -1), 2);
  EXPECT_EQ(store->get("n"), Bytes("2"));  // Counters read back as decimal text, as in c10d.
  EXPECT_TRUE(store->check({"a", "n"}));
  EXPECT_FALSE(store->check({"a", "missing"}));
  EXPECT_EQ(store->getNumKeys(), 2);
  store->wait({"a", "n"});
  // compareSet with c10d's semantics.
  EXPECT_EQ(store->compareSet("c", {}, Bytes("one")), Bytes("one"));
  EXPECT_EQ(store->compareSet("c", Bytes("wrong"), Bytes("two")), Bytes("one"));
  EXPECT_EQ(store->compareSet("c", Bytes("one"), Bytes("two")), Bytes("two"));
  EXPECT_EQ(store->compareSet("absent", Bytes("x"), Bytes("y")), Bytes("x"));
  EXPECT_TRUE(store->deleteKey("a"));
  EXPECT_FALSE(store->deleteKey("a"));
  EXPECT_EQ(store->getNumKeys(), 2);
  // A clone shares the connection and scope.
  c10::intrusive_ptr<c10d::Store> clone = store->clone();
  EXPECT_EQ(clone->get("c"), Bytes("two"));
}

TEST_F(GrpcStoreTest, GetWaitsForAKeyAnotherRankSetsLater) {
  c10::intrusive_ptr<GrpcStore> reader = MustCreate(Options());
  c10::intrusive_ptr<GrpcStore> writer = MustCreate(Options());
  ASSERT_TRUE(reader && writer);
  auto value = std::async(std::launch::async, [&] { return reader->get("later"); });
  while (rendezvous_.num_waiters() == 0) std::this_thread::yield();
  writer->set("later", Bytes("here"));
  ASSERT_EQ(value.wait_for(kLiveness), std::future_status::ready);
  EXPECT_EQ(value.get(), Bytes("here"));
}

TEST_F(GrpcStoreTest, GetAndWaitTimeOutNamingKeyScopeAndAddress) {
  GrpcStoreOptions options = Options();
  options.timeout = milliseconds(100);
  c10::intrusive_ptr<GrpcStore> store = MustCreate(options);
  ASSERT_TRUE(store);
  const std::string get_error = ErrorText([&] { store->get("never"); });
  EXPECT_THAT(get_error, HasSubstr("'never'"));
  EXPECT_THAT(get_error, HasSubstr("job 'job-g' attempt 1"));
  EXPECT_THAT(get_error, HasSubstr(address_));
  EXPECT_THAT(get_error, HasSubstr("DEADLINE_EXCEEDED"));
  const std::string wait_error = ErrorText([&] {
    store->wait({"never", "either"}, milliseconds(50));
  });
  EXPECT_THAT(wait_error, HasSubstr("'either'"));
  EXPECT_EQ(rendezvous_.num_waiters(), 0u);
}

TEST_F(GrpcStoreTest, AttemptsDoNotSeeEachOthersKeys) {
  ASSERT_TRUE(rendezvous_.OpenAttempt({"job-g", 2}).ok());
  c10::intrusive_ptr<GrpcStore> first = MustCreate(Options(1));
  c10::intrusive_ptr<GrpcStore> second = MustCreate(Options(2));
  ASSERT_TRUE(first && second);
  first->set("addr/0", Bytes("old"));
  EXPECT_FALSE(second->check({"addr/0"}));
  second->set("addr/0", Bytes("new"));
  EXPECT_EQ(first->get("addr/0"), Bytes("old"));
  // The coordinator ends attempt 1: its ranks are refused from then on.
  rendezvous_.DropAttempt({"job-g", 1});
  EXPECT_THAT(ErrorText([&] { first->set("k", Bytes("v")); }), HasSubstr("FAILED_PRECONDITION"));
  EXPECT_EQ(second->get("addr/0"), Bytes("new"));
}

TEST_F(GrpcStoreTest, CreateFailsForAnAttemptTheCoordinatorDidNotOpen) {
  absl::StatusOr<c10::intrusive_ptr<GrpcStore>> store = GrpcStore::Create(Options(5));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("attempt 5"));
}

TEST_F(GrpcStoreTest, CreateFailsNamingTheAddressWhenNothingListens) {
  const int port = deepnet::testing::UnusedLoopbackPort();
  ASSERT_GT(port, 0);
  GrpcStoreOptions options = Options();
  options.address = "127.0.0.1:" + std::to_string(port);
  options.rpc_timeout = milliseconds(300);
  auto created = std::async(std::launch::async, [&] { return GrpcStore::Create(options); });
  ASSERT_EQ(created.wait_for(kLiveness), std::future_status::ready);
  absl::StatusOr<c10::intrusive_ptr<GrpcStore>> store = created.get();
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(store.status().message(), HasSubstr(options.address));
}

TEST_F(GrpcStoreTest, CallsFailNamingTheAddressOnceTheCoordinatorIsGone) {
  GrpcStoreOptions options = Options();
  options.rpc_timeout = milliseconds(300);
  options.timeout = milliseconds(300);
  c10::intrusive_ptr<GrpcStore> store = MustCreate(options);
  ASSERT_TRUE(store);
  StopServer();
  auto set_error = std::async(std::launch::async,
                              [&] { return ErrorText([&] { store->set("k", Bytes("v")); }); });
  ASSERT_EQ(set_error.wait_for(kLiveness), std::future_status::ready);
  EXPECT_THAT(set_error.get(), HasSubstr(address_));
  auto get_error =
      std::async(std::launch::async, [&] { return ErrorText([&] { store->get("k"); }); });
  ASSERT_EQ(get_error.wait_for(kLiveness), std::future_status::ready);
  const std::string text = get_error.get();
  EXPECT_THAT(text, HasSubstr("'k'"));
  EXPECT_THAT(text, HasSubstr(address_));
}

// Three protobuf users share this process: LibTorch (libprotobuf 3.21 for its caffe2 protos),
// our generated deepnet.v1 code (the same libprotobuf) and SentencePiece (its own embedded
// protobuf 3.14, isolated in the RTLD_DEEPBIND module). Reaching main() already proves the
// static initialisers did not clash; this checks all three work after each other.
TEST_F(GrpcStoreTest, CoexistsWithLibTorchAndSentencePieceProtobufs) {
  const std::string wire = deepnet::testing::SerializeSetRequest("job-g", "k", "v");

  std::string dir_pattern =
      (std::filesystem::temp_directory_path() / "deepnet_grpc_spm_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_pattern.data()), nullptr);
  const std::filesystem::path dir = dir_pattern;
  data::SentencePieceTrainOptions options;
  // Enough distinct words for a 60-piece vocabulary.
  std::vector<std::string> words;
  for (int i = 0; i < 80; ++i) {
    std::string word;
    for (int j = 0; j < 3 + i % 4; ++j) word += static_cast<char>('a' + (i * 7 + j * 11) % 26);
    words.push_back(word);
  }
  for (int i = 0; i < 400; ++i) {
    options.sentences["en"].push_back(words[i % 80] + " " + words[(i * 13) % 80] + " " +
                                      words[(i * 29) % 80]);
  }
  options.vocab_size = 60;
  options.training_sentences = 400;
  options.num_threads = 1;
  options.model_prefix = (dir / "tiny").string();
  const absl::Status trained = data::TrainSentencePiece(options);
  auto tokenizer = data::SentencePieceTokenizer::Load(options.model_prefix + ".model");
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  ASSERT_TRUE(trained.ok()) << trained;
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_FALSE((*tokenizer)->Encode("the cat sat").empty());

  absl::StatusOr<std::pair<std::string, std::string>> parsed =
      deepnet::testing::ParseSetRequest(wire);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first, "job-g");
  EXPECT_EQ(parsed->second, "v");
  c10::intrusive_ptr<GrpcStore> store = MustCreate(Options());
  ASSERT_TRUE(store);
  store->set("after-spm", Bytes("ok"));
  EXPECT_EQ(store->get("after-spm"), Bytes("ok"));
}

#ifdef DEEPNET_HAVE_GLOO
// Three ranks bootstrap Gloo through the coordinator's rendezvous and all-reduce.
TEST_F(GrpcStoreTest, ThreeGlooRanksAllReduceThroughTheRendezvous) {
  constexpr int kRanks = 3;
  std::vector<std::future<std::string>> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.push_back(std::async(std::launch::async, [this, rank]() -> std::string {
      absl::StatusOr<c10::intrusive_ptr<GrpcStore>> store = GrpcStore::Create(Options());
      if (!store.ok()) return std::string(store.status().message());
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
          GlooCommunicator::Create(*store, rank, kRanks, milliseconds(30000), "127.0.0.1");
      if (!comm.ok()) return std::string(comm.status().message());
      torch::Tensor tensor = torch::full({4}, static_cast<float>(rank + 1));
      if (absl::Status status = (*comm)->AllReduceSum(tensor); !status.ok()) {
        return std::string(status.message());
      }
      if (!torch::equal(tensor, torch::full({4}, 6.0f))) return "wrong all-reduce result";
      return "ok";
    }));
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].wait_for(kLiveness), std::future_status::ready) << "rank " << rank;
    EXPECT_EQ(ranks[rank].get(), "ok") << "rank " << rank;
  }
}

// What a trainer started by deepnet-worker does: DEEPNET_RENDEZVOUS=grpc://HOST:PORT with the
// job attempt from DEEPNET_JOB_ID/DEEPNET_ATTEMPT, through the communicator factory.
TEST_F(GrpcStoreTest, WorldCommunicatorBootstrapsThroughAGrpcRendezvous) {
  constexpr int kRanks = 2;
  std::vector<std::future<std::string>> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.push_back(std::async(std::launch::async, [this, rank]() -> std::string {
      LaunchEnv env;
      env.rank = rank;
      env.world_size = kRanks;
      env.local_rank = rank;
      env.local_size = kRanks;
      CommOptions options;
      options.backend = CommBackendKind::kGloo;
      options.timeout = milliseconds(30000);
      options.rendezvous = "grpc://" + address_;
      options.grpc_job_id = "job-g";
      options.grpc_attempt = 1;
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          CreateWorldCommunicator(options, env, nullptr);
      if (!comm.ok()) return std::string(comm.status().message());
      torch::Tensor tensor = torch::full({3}, static_cast<float>(rank + 1));
      if (absl::Status status = (*comm)->AllReduceSum(tensor); !status.ok()) {
        return std::string(status.message());
      }
      if (!torch::equal(tensor, torch::full({3}, 3.0f))) return "wrong all-reduce result";
      return "ok";
    }));
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(ranks[rank].wait_for(kLiveness), std::future_status::ready) << "rank " << rank;
    EXPECT_EQ(ranks[rank].get(), "ok") << "rank " << rank;
  }
  // An attempt the coordinator did not open is refused, naming it.
  LaunchEnv env;
  env.rank = 0;
  env.world_size = 2;
  CommOptions options;
  options.rendezvous = "grpc://" + address_;
  options.grpc_job_id = "job-g";
  options.grpc_attempt = 9;
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = CreateRendezvousStore(options, env);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("attempt 9"));
}
#endif

}  // namespace
}  // namespace deepnet::comm
