#include "coordinator/auth/auth.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "coordinator/rendezvous/rendezvous_service.h"
#include "rpc/rpc_util.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
namespace v1 = deepnet::v1;

constexpr char kAliceToken[] = "alice-0123456789abcdef";
constexpr char kRootToken[] = "root-0123456789abcdef";
constexpr char kWorkerToken[] = "worker-0123456789abcdef";

void WriteAuthFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// The tokens file of the tests: alice (user), root (admin), node (worker).
std::string TokensText() {
  return std::string("# DeepNet tokens\n\n") + kAliceToken + " alice\n" + "  " + kRootToken +
         "\troot admin   # operators\n" + kWorkerToken + " node worker\r\n";
}

absl::StatusOr<std::unique_ptr<Authenticator>> LoadText(const TempDir& dir,
                                                        const std::string& text) {
  const std::string path = dir / "tokens";
  WriteAuthFile(path, text);
  return Authenticator::Load(path);
}

absl::StatusOr<Principal> WithAuthorization(const Authenticator& auth, const std::string& value) {
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  metadata.emplace("authorization", value);
  return auth.Authenticate(metadata);
}

TEST(AuthenticatorTest, LoadsUsersAndRoles) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(dir, TokensText());
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_FALSE((*auth)->open());
  EXPECT_EQ((*auth)->num_tokens(), 3u);

  absl::StatusOr<Principal> alice = WithAuthorization(**auth, std::string("Bearer ") + kAliceToken);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->user, "alice");
  EXPECT_EQ(alice->role, Role::kUser);

  // The scheme is case-insensitive (RFC 6750), surrounding blanks are ignored.
  absl::StatusOr<Principal> root = WithAuthorization(**auth, std::string("bearer ") + kRootToken);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->user, "root");
  EXPECT_EQ(root->role, Role::kAdmin);

  absl::StatusOr<Principal> node = WithAuthorization(**auth, std::string("Bearer ") + kWorkerToken);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->user, "node");
  EXPECT_EQ(node->role, Role::kWorker);
}

// SIGHUP re-reads the tokens file: a removed token is refused at once and a principal it
// authenticated is no longer StillValid; a bad file keeps the tokens in force.
TEST(AuthenticatorTest, ReloadRevokesRemovedTokensAndKeepsTheOldOnABadFile) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(dir, TokensText());
  ASSERT_TRUE(auth.ok()) << auth.status();
  absl::StatusOr<Principal> alice = WithAuthorization(**auth, std::string("Bearer ") + kAliceToken);
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE((*auth)->StillValid(*alice).ok());

  WriteAuthFile(dir / "tokens", "this line has no token\n");
  const absl::Status bad = (*auth)->Reload(dir / "tokens");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(WithAuthorization(**auth, std::string("Bearer ") + kAliceToken).ok());

  WriteAuthFile(dir / "tokens", std::string(kRootToken) + " root admin\n");
  ASSERT_TRUE((*auth)->Reload(dir / "tokens").ok());
  EXPECT_EQ((*auth)->num_tokens(), 1u);
  EXPECT_EQ(WithAuthorization(**auth, std::string("Bearer ") + kAliceToken).status().code(),
            absl::StatusCode::kUnauthenticated);
  const absl::Status revoked = (*auth)->StillValid(*alice);
  EXPECT_EQ(revoked.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(revoked.message(), HasSubstr("revoked"));
  // The same token given to another user is not the same credential.
  WriteAuthFile(dir / "tokens", std::string(kAliceToken) + " mallory\n");
  ASSERT_TRUE((*auth)->Reload(dir / "tokens").ok());
  EXPECT_FALSE((*auth)->StillValid(*alice).ok());
}

TEST(AuthenticatorTest, StillValidEndsAtTheTokensExpiry) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(
      dir, std::string(kAliceToken) + " alice expires=2030-01-01T00:00:00Z\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  const std::string bearer = std::string("Bearer ") + kAliceToken;
  metadata.emplace("authorization", bearer);
  absl::StatusOr<Principal> alice =
      (*auth)->Authenticate(metadata, absl::FromUnixSeconds(1800000000));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_TRUE((*auth)->StillValid(*alice, absl::FromUnixSeconds(1800000000)).ok());
  const absl::Status expired = (*auth)->StillValid(*alice, absl::FromUnixSeconds(1900000000));
  EXPECT_EQ(expired.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(expired.message(), HasSubstr("expired at 2030-01-01T00:00:00"));
}

TEST(AuthenticatorTest, BadLinesNameFileAndLine) {
  TempDir dir;
  const std::string good = std::string(kAliceToken) + " alice\n";
  const struct {
    std::string text;
    std::string expected;
  } cases[] = {
      {good + "tooshort alice\n", ":2: "},
      {good + "lonely-token-0123456789\n", ":2: expected 'TOKEN USER [ROLE] [KEY=VALUE ...]'"},
      {good + "another-token-0123456789 bob admin extra\n", ":2: field 4 'extra' is neither"},
      {good + "another-token-0123456789 bob root\n", ":2: unknown role 'root'"},
      {good + "another-token-0123456789 ../bob\n", ":2: user name '../bob' is not valid"},
      {good + "another-token-0123456789 bob shell=/bin/sh\n", ":2: unknown option 'shell'"},
      {good + "another-token-0123456789 bob teams=nlp,../x\n", ":2: teams: '../x' is not"},
      {good + "another-token-0123456789 bob uid=0\n", ":2: uid: '0' is not a numeric id"},
      {good + "another-token-0123456789 bob gid=x\n", ":2: gid: 'x' is not a numeric id"},
      {good + "another-token-0123456789 bob expires=tomorrow\n", ":2: expires: 'tomorrow'"},
      {good + "another-token-0123456789 alice teams=nlp\n",
       ":2: user 'alice' has other teams, uid or gid than on line 1"},
      {"# header\n" + good + kAliceToken + " mallory\n", ":3: duplicate token (already on line 2)"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(dir, c.text);
    ASSERT_FALSE(auth.ok()) << c.text;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(auth.status().message(), HasSubstr(dir / "tokens")) << c.text;
    EXPECT_THAT(auth.status().message(), HasSubstr(c.expected)) << c.text;
    // Tokens never appear in messages.
    EXPECT_THAT(auth.status().message(), Not(HasSubstr(kAliceToken))) << c.text;
    EXPECT_THAT(auth.status().message(), Not(HasSubstr("tooshort"))) << c.text;
  }
}

TEST(AuthenticatorTest, LoadsTeamsIdsAndExpiry) {
  TempDir dir;
  const std::string text =
      std::string(kAliceToken) + " alice teams=nlp,asr,nlp uid=2001 gid=3001\n" + kRootToken +
      " alice user uid=2001 gid=3001 teams=asr,nlp expires=2030-01-31T12:00:00Z\n";
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(dir, text);
  ASSERT_TRUE(auth.ok()) << auth.status();

  absl::StatusOr<Principal> alice = WithAuthorization(**auth, std::string("Bearer ") + kAliceToken);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->teams, (std::vector<std::string>{"asr", "nlp"}));
  EXPECT_EQ(alice->uid, 2001);
  EXPECT_EQ(alice->gid, 3001);
  EXPECT_EQ(alice->expires, absl::InfiniteFuture());

  // The second token expires: accepted before, refused from that instant on, without the token.
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  const std::string value = std::string("Bearer ") + kRootToken;
  metadata.emplace("authorization", value);
  const absl::Time expiry = absl::FromUnixSeconds(1896091200);  // 2030-01-31T12:00:00Z
  absl::StatusOr<Principal> before = (*auth)->Authenticate(metadata, expiry - absl::Seconds(1));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->expires, expiry);
  absl::StatusOr<Principal> after = (*auth)->Authenticate(metadata, expiry);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(after.status().message(), HasSubstr("expired at 2030-01-31T12:00:00"));
  EXPECT_THAT(after.status().message(), Not(HasSubstr(kRootToken)));

  absl::StatusOr<Principal> found = (*auth)->FindUser("alice");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->uid, 2001);
  EXPECT_EQ(found->teams, (std::vector<std::string>{"asr", "nlp"}));
  EXPECT_EQ((*auth)->FindUser("bob").status().code(), absl::StatusCode::kNotFound);
}

TEST(AuthenticatorTest, PrincipalNamesAreSafeFolderNames) {
  EXPECT_TRUE(IsValidPrincipalName("alice"));
  EXPECT_TRUE(IsValidPrincipalName("team_nlp-2.x"));
  EXPECT_FALSE(IsValidPrincipalName(""));
  EXPECT_FALSE(IsValidPrincipalName("."));
  EXPECT_FALSE(IsValidPrincipalName(".."));
  EXPECT_FALSE(IsValidPrincipalName(".hidden"));
  EXPECT_FALSE(IsValidPrincipalName("-rf"));
  EXPECT_FALSE(IsValidPrincipalName("a/b"));
  EXPECT_FALSE(IsValidPrincipalName(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValidPrincipalName(std::string(65, 'a')));
  EXPECT_TRUE(IsValidPrincipalName(std::string(64, 'a')));
}

TEST(AuthenticatorTest, MissingEmptyAndUnreadableFiles) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> missing = Authenticator::Load(dir / "absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir / "absent"));

  absl::StatusOr<std::unique_ptr<Authenticator>> empty = LoadText(dir, "# nobody\n\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("holds no token"));

  absl::StatusOr<std::unique_ptr<Authenticator>> folder = Authenticator::Load(dir.path());
  ASSERT_FALSE(folder.ok());
  EXPECT_THAT(folder.status().message(), HasSubstr(dir.path()));
}

TEST(AuthenticatorTest, MissingMalformedAndUnknownTokensAreUnauthenticated) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(dir, TokensText());
  ASSERT_TRUE(auth.ok()) << auth.status();

  std::multimap<grpc::string_ref, grpc::string_ref> none;
  absl::StatusOr<Principal> missing = (*auth)->Authenticate(none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing credentials"));

  for (const std::string& value : {std::string("Basic ") + kAliceToken, std::string(kAliceToken),
                                   std::string("Bearer "), std::string("Bearer    ")}) {
    absl::StatusOr<Principal> malformed = WithAuthorization(**auth, value);
    ASSERT_FALSE(malformed.ok()) << value;
    EXPECT_EQ(malformed.status().code(), absl::StatusCode::kUnauthenticated) << value;
    EXPECT_THAT(malformed.status().message(), HasSubstr("malformed")) << value;
    EXPECT_THAT(malformed.status().message(), Not(HasSubstr(kAliceToken))) << value;
  }

  // A prefix, an extension and a one-character change of a real token are all unknown.
  const std::string alice = kAliceToken;
  std::string changed = alice;
  changed.back() = 'x';
  for (const std::string& token : {alice.substr(0, alice.size() - 1), alice + "0", changed}) {
    absl::StatusOr<Principal> unknown = WithAuthorization(**auth, "Bearer " + token);
    ASSERT_FALSE(unknown.ok()) << token;
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(unknown.status().message(), HasSubstr("unknown bearer token"));
    EXPECT_THAT(unknown.status().message(), Not(HasSubstr(token)));
  }
}

TEST(AuthenticatorTest, OpenModeMakesEveryoneAnonymousAdmin) {
  absl::StatusOr<std::unique_ptr<Authenticator>> loaded = Authenticator::Load("");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::unique_ptr<Authenticator> open = Authenticator::Open();
  for (const Authenticator* auth : {open.get(), loaded->get()}) {
    EXPECT_TRUE(auth->open());
    std::multimap<grpc::string_ref, grpc::string_ref> none;
    absl::StatusOr<Principal> principal = auth->Authenticate(none);
    ASSERT_TRUE(principal.ok()) << principal.status();
    EXPECT_EQ(principal->user, "anonymous");
    EXPECT_EQ(principal->role, Role::kAdmin);
  }
}

TEST(AuthTest, JobAccessIsForTheOwnerAndAdmins) {
  const Principal alice{"alice", Role::kUser};
  const Principal bob{"bob", Role::kUser};
  const Principal root{"root", Role::kAdmin};
  const Principal node{"node", Role::kWorker};
  EXPECT_TRUE(CheckJobAccess(alice, "alice", "j-000001").ok());
  EXPECT_TRUE(CheckJobAccess(root, "alice", "j-000001").ok());
  for (const Principal& other : {bob, node}) {
    absl::Status denied = CheckJobAccess(other, "alice", "j-000001");
    EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(denied.message(), HasSubstr("'" + other.user + "'"));
    EXPECT_THAT(denied.message(), HasSubstr("j-000001"));
  }
}

TEST(AuthTest, WorkerAccessIsForWorkersAndAdmins) {
  EXPECT_TRUE(CheckWorkerAccess({"node", Role::kWorker}).ok());
  EXPECT_TRUE(CheckWorkerAccess({"root", Role::kAdmin}).ok());
  absl::Status denied = CheckWorkerAccess({"alice", Role::kUser});
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("'alice'"));
  EXPECT_EQ(RoleName(Role::kUser), "user");
  EXPECT_EQ(RoleName(Role::kAdmin), "admin");
  EXPECT_EQ(RoleName(Role::kWorker), "worker");
}

// A TLS server (self-signed certificate made with the openssl CLI at run time) serving the
// Rendezvous service with authentication: an insecure client cannot talk to it, a TLS client
// can, and then needs the scope's trainer credential.
TEST(AuthTlsTest, InsecureClientFailsTlsClientAuthenticates) {
  TempDir dir;
  const std::string cert = dir / "cert.pem";
  const std::string key = dir / "key.pem";
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=deepnet-test -addext subjectAltName=DNS:deepnet-test -keyout '" +
      key + "' -out '" + cert + "' > '" + (dir / "openssl.log") + "' 2>&1";
  if (std::system("openssl version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl command-line tool is not installed (Debian: openssl)";
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      rpc::MakeServerCredentials(cert, key);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  TempDir tokens_dir;
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = LoadText(tokens_dir, TokensText());
  ASSERT_TRUE(auth.ok()) << auth.status();
  RendezvousStore store;
  ASSERT_TRUE(store.OpenAttempt({"job", 1}).ok());
  const TrainerCredentials trainer_credentials("tls-test-key");
  RendezvousService service(store, auth->get(), &trainer_credentials);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *credentials, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);

  auto num_keys = [](const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
    v1::RendezvousNumKeysRequest request;
    request.mutable_scope()->set_job_id("job");
    request.mutable_scope()->set_attempt(1);
    v1::RendezvousNumKeysResponse response;
    grpc::ClientContext context;
    rpc::PrepareContext(&context, token, std::chrono::seconds(10));
    return v1::Rendezvous::NewStub(channel)->NumKeys(&context, request, &response);
  };

  absl::StatusOr<std::shared_ptr<grpc::Channel>> insecure = rpc::MakeChannel({address, "", ""});
  ASSERT_TRUE(insecure.ok()) << insecure.status();
  const std::string trainer = trainer_credentials.Mint("job", 1, 0);
  const grpc::Status plain = num_keys(*insecure, trainer);
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << rpc::Describe(plain);

  absl::StatusOr<std::shared_ptr<grpc::Channel>> tls =
      rpc::MakeChannel({address, cert, "deepnet-test"});
  ASSERT_TRUE(tls.ok()) << tls.status();
  const grpc::Status granted = num_keys(*tls, trainer);
  EXPECT_TRUE(granted.ok()) << rpc::Describe(granted);
  EXPECT_EQ(num_keys(*tls, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(num_keys(*tls, kAliceToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  store.Shutdown();
  server->Shutdown();
}

}  // namespace
}  // namespace deepnet::coordinator
