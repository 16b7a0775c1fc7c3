// Which account trainers run as and which job paths a worker accepts: the trainer account flags,
// a root daemon with no account refusing assignments, the storage policy checked again before a
// trainer starts, and (as root) a trainer really running as the unprivileged uid.
#include <grp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/worker/worker_test_util.h"
#include "worker/trainer_account.h"
#include "worker/trainer_supervisor.h"

namespace deepnet::worker {
namespace {

using ::testing::HasSubstr;

constexpr char kNobody[] = "nobody";

TEST(TrainerAccountFlagsTest, RootDaemonSwitchesNonRootDaemonRunsAsItself) {
  SupervisorOptions sup;
  ASSERT_TRUE(ConfigureTrainerAccount({"", 4000, 4001}, 0, &sup).ok());
  EXPECT_TRUE(sup.switch_account);
  EXPECT_EQ(sup.trainer_uid, 4000);
  EXPECT_EQ(sup.trainer_gid, 4001);

  SupervisorOptions none;
  ASSERT_TRUE(ConfigureTrainerAccount({}, 0, &none).ok());
  EXPECT_TRUE(none.switch_account);  // Root: an account is required, per assignment.
  EXPECT_EQ(none.trainer_uid, -1);

  SupervisorOptions self;
  ASSERT_TRUE(ConfigureTrainerAccount({}, 1234, &self).ok());
  EXPECT_FALSE(self.switch_account);
  ASSERT_TRUE(ConfigureTrainerAccount({"", 1234, 1234}, 1234, &self).ok());
  EXPECT_FALSE(self.switch_account);
}

TEST(TrainerAccountFlagsTest, BadAccountsAreRefusedNamingTheFlag) {
  SupervisorOptions sup;
  absl::Status zero = ConfigureTrainerAccount({"", 0, 5}, 0, &sup);
  EXPECT_THAT(std::string(zero.message()), HasSubstr("never run as root"));
  absl::Status zero_gid = ConfigureTrainerAccount({"", 5, 0}, 0, &sup);
  EXPECT_FALSE(zero_gid.ok());
  absl::Status unknown = ConfigureTrainerAccount({"no-such-user-deepnet", -1, -1}, 0, &sup);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("--trainer-user no-such-user-deepnet"));
  absl::Status both = ConfigureTrainerAccount({"root", 5, -1}, 0, &sup);
  EXPECT_THAT(std::string(both.message()), HasSubstr("not both"));
  absl::Status gid_alone = ConfigureTrainerAccount({"", -1, 5}, 0, &sup);
  EXPECT_THAT(std::string(gid_alone.message()), HasSubstr("--trainer-gid"));
  absl::Status other = ConfigureTrainerAccount({"", 4000, 4000}, 1234, &sup);
  EXPECT_THAT(std::string(other.message()), HasSubstr("only a daemon running as root"));
  EXPECT_FALSE(ConfigureStorageRoot("relative/dir", &sup).ok());
  EXPECT_FALSE(ConfigureStorageRoot("/no/such/deepnet/root", &sup).ok());
}

class TrainerAccountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Open to an unprivileged trainer: the fake trainer, the work folder and FAKE_DIR.
    chmod(dir_.path().c_str(), 0755);
    fake_dir_ = dir_.path() + "/fake";
    std::filesystem::create_directories(fake_dir_);
    chmod(fake_dir_.c_str(), 0777);
    root_ = dir_.path() + "/storage";
    for (const char* d : {"users/alice/runs", "users/bob/runs", "datasets"}) {
      std::filesystem::create_directories(root_ + "/" + d);
    }
    chmod((root_ + "/users/bob").c_str(), 0700);
    options_.trainer = testing::WriteFakeTrainer(dir_.path());
    options_.work_dir = dir_.path() + "/work";
    options_.slots = {{0, false, -1}};
    options_.base_env = {"PATH=/usr/bin:/bin"};
  }
  void TearDown() override {
    supervisor_.reset();
    testing::KillPidIn(fake_dir_ + "/pid-0");
  }

  AssignmentSpec Spec(const std::string& config_yaml, const std::string& owner = "alice") {
    AssignmentSpec spec;
    spec.job_id = "job-1";
    spec.attempt = 1;
    spec.ranks = {{0, 0}};
    spec.world_size = 1;
    spec.config_yaml = config_yaml;
    spec.owner = owner;
    spec.env = {{"FAKE_DIR", fake_dir_}, {"FAKE_MODE", "run"}};
    return spec;
  }
  void UseStorageRoot() { ASSERT_TRUE(ConfigureStorageRoot(root_, &options_).ok()); }
  TrainerSupervisor& Supervisor() {
    if (!supervisor_) supervisor_ = std::make_unique<TrainerSupervisor>(options_);
    return *supervisor_;
  }

  testing::TempDir dir_;
  std::string fake_dir_;
  std::string root_;
  SupervisorOptions options_;
  std::unique_ptr<TrainerSupervisor> supervisor_;
};

TEST_F(TrainerAccountTest, RootDaemonWithoutAnAccountRefusesToStartTrainers) {
  options_.switch_account = true;  // What ConfigureTrainerAccount sets for a root daemon.
  const absl::Status status = Supervisor().Assign(Spec("name: t\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("runs as root and has no account to run trainers as"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("--trainer-user"));
  EXPECT_EQ(Supervisor().size(), 0u);
}

TEST_F(TrainerAccountTest, AnAccountOfUidZeroIsRefused) {
  options_.switch_account = true;
  AssignmentSpec spec = Spec("name: t\n");
  spec.uid = 0;
  spec.gid = 0;
  const absl::Status status = Supervisor().Assign(spec);
  EXPECT_THAT(std::string(status.message()), HasSubstr("never run as uid or gid 0"));
  EXPECT_EQ(Supervisor().size(), 0u);
}

TEST_F(TrainerAccountTest, WorkerRefusesPathsThatEscapeTheStorageRoot) {
  UseStorageRoot();
  for (const std::string& dir : {root_ + "/users/bob/runs", root_ + "/users/alice/../bob/runs",
                                 std::string("/etc"), root_ + "/datasets"}) {
    const absl::Status status = Supervisor().Assign(Spec("checkpoint: {dir: '" + dir + "'}\n"));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << dir;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("checkpoint.dir: refused by the storage policy"))
        << dir;
  }
  const absl::Status data =
      Supervisor().Assign(Spec("data: {source: tsv, train_path: /etc/shadow}\n"));
  EXPECT_THAT(std::string(data.message()), HasSubstr("data.train_path: refused by the storage"));
  EXPECT_EQ(Supervisor().size(), 0u);
  EXPECT_FALSE(std::filesystem::exists(options_.work_dir + "/job-1"));
}

TEST_F(TrainerAccountTest, OwnPathsStartAndTheUsersFolderIsCreatedPrivate) {
  UseStorageRoot();
  ASSERT_TRUE(Supervisor()
                  .Assign(Spec("checkpoint: {dir: '" + root_ + "/users/carol/runs/a'}\n", "carol"))
                  .ok());
  EXPECT_EQ(Supervisor().size(), 1u);
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/users/carol").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Root only: the trainer runs as the configured account, which cannot write into another
// user's 0700 folder, and its own folder under the storage root is its own.
TEST_F(TrainerAccountTest, TrainerRunsAsTheUnprivilegedAccount) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch accounts";
  struct passwd* nobody = getpwnam(kNobody);
  if (nobody == nullptr) GTEST_SKIP() << "no account named nobody";
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  ASSERT_TRUE(CheckExecutableBy(options_.trainer, uid, gid).ok());
  options_.switch_account = true;
  options_.trainer_uid = uid;
  options_.trainer_gid = gid;
  UseStorageRoot();
  AssignmentSpec spec = Spec("checkpoint: {dir: '" + root_ + "/users/dave/runs'}\n", "dave");
  spec.env["FAKE_TOUCH"] = root_ + "/users/bob/intruder";
  ASSERT_TRUE(Supervisor().Assign(spec).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return testing::PidIn(fake_dir_ + "/pid-0") > 0; }));
  ASSERT_TRUE(
      testing::WaitUntil([&] { return !testing::ReadFile(fake_dir_ + "/touch-0").empty(); }));
  const pid_t pid = testing::PidIn(fake_dir_ + "/pid-0");
  const std::string status = testing::ReadFile("/proc/" + std::to_string(pid) + "/status");
  const std::string ids = std::to_string(uid) + "\t" + std::to_string(uid) + "\t" +
                          std::to_string(uid) + "\t" + std::to_string(uid);
  EXPECT_THAT(status, HasSubstr("Uid:\t" + ids)) << status;
  EXPECT_THAT(testing::ReadFile(fake_dir_ + "/uid-0"), HasSubstr(std::to_string(uid)));
  EXPECT_EQ(testing::ReadFile(fake_dir_ + "/touch-0"), "no\n");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/users/bob/intruder"));
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/users/dave").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Root only: a trainer binary under a 0700 folder is refused at startup, naming the account.
TEST_F(TrainerAccountTest, ABinaryTheAccountCannotReachIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch accounts";
  const std::string hidden = dir_.path() + "/private";
  std::filesystem::create_directories(hidden);
  chmod(hidden.c_str(), 0700);
  const std::string trainer = testing::WriteFakeTrainer(hidden);
  const absl::Status status = CheckExecutableBy(trainer, 60001, 60001);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("uid 60001"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("0700"));
  EXPECT_TRUE(CheckExecutableBy(options_.trainer, 60001, 60001).ok());
  // And a trainer that cannot be executed by the account fails to start, saying so.
  options_.trainer = trainer;
  options_.switch_account = true;
  options_.trainer_uid = 60001;
  options_.trainer_gid = 60001;
  const absl::Status start = Supervisor().Assign(Spec("name: t\n"));
  EXPECT_EQ(start.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(start.message()), HasSubstr("as uid 60001 gid 60001"));
  EXPECT_THAT(std::string(start.message()), HasSubstr("exec: Permission denied"));
}

TEST_F(TrainerAccountTest, TheOwnersUidFromTheTokensFileWins) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch accounts";
  options_.switch_account = true;
  options_.trainer_uid = 60001;
  options_.trainer_gid = 60001;
  AssignmentSpec spec = Spec("name: t\n");
  spec.uid = 60002;
  spec.gid = 60003;
  ASSERT_TRUE(Supervisor().Assign(spec).ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return testing::PidIn(fake_dir_ + "/pid-0") > 0; }));
  const pid_t pid = testing::PidIn(fake_dir_ + "/pid-0");
  const std::string status = testing::ReadFile("/proc/" + std::to_string(pid) + "/status");
  EXPECT_THAT(status, HasSubstr("Uid:\t60002\t60002\t60002\t60002")) << status;
  EXPECT_THAT(status, HasSubstr("Gid:\t60003\t60003\t60003\t60003")) << status;
  EXPECT_THAT(status, HasSubstr("Groups:\t60003")) << status;
}

}  // namespace
}  // namespace deepnet::worker
