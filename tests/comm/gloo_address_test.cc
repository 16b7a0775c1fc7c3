// SelectGlooAddress on a made-up host: which address Gloo binds for each launch environment, and
// that a multi-host world never gets loopback unless DEEPNET_ADVERTISE_ADDRESS says so.
#include "comm/gloo_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace deepnet::comm {
namespace {

using ::testing::HasSubstr;

// A host with lo (127.0.0.1, ::1), eth0 (10.0.0.2, up), ib0 (192.168.5.2, up) and dn0 (down).
struct FakeHost {
  std::map<std::string, std::string> variables;
  std::string routed;         // what route_source answers
  std::string hostname_addr;  // what hostname_address answers
  std::string asked_route;    // the host route_source was asked about

  AddressProbe Probe() {
    AddressProbe probe;
    probe.interfaces = [] {
      return std::vector<InterfaceAddress>{
          {"lo", "127.0.0.1", true, true},   {"lo", "::1", true, true},
          {"dn0", "10.9.0.2", false, false}, {"eth0", "fe80::1", false, true},
          {"eth0", "10.0.0.2", false, true}, {"ib0", "192.168.5.2", false, true}};
    };
    probe.route_source = [this](const std::string& host) {
      asked_route = host;
      return routed;
    };
    probe.hostname_address = [this] { return hostname_addr; };
    return probe;
  }
  std::function<const char*(const char*)> Getenv() {
    return [this](const char* name) -> const char* {
      auto it = variables.find(name);
      return it == variables.end() ? nullptr : it->second.c_str();
    };
  }
  absl::StatusOr<GlooAddress> Select(const LaunchEnv& env, const std::string& host = "") {
    return SelectGlooAddress(env, host, Getenv(), Probe());
  }
};

LaunchEnv World(int world_size, int local_size) {
  LaunchEnv env;
  env.world_size = world_size;
  env.local_size = local_size;
  env.launcher = "slurm";
  return env;
}

TEST(GlooAddressTest, OneNodeWorldBindsLoopback) {
  FakeHost host;
  absl::StatusOr<GlooAddress> a = host.Select(World(4, 4));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
}

TEST(GlooAddressTest, MultiHostTakesTheAddressThatRoutesToTheRendezvousHost) {
  FakeHost host;
  host.routed = "192.168.5.2";
  host.hostname_addr = "10.0.0.2";
  absl::StatusOr<GlooAddress> a = host.Select(World(4, 2), "node1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "192.168.5.2");
  EXPECT_EQ(host.asked_route, "node1");
  EXPECT_THAT(a->source, HasSubstr("node1"));
}

TEST(GlooAddressTest, MultiHostNeverBindsLoopbackWhenTheRouteAndHostnameSayLoopback) {
  // Debian's /etc/hosts maps the hostname to 127.0.1.1; MASTER_ADDR may be this very host.
  FakeHost host;
  host.routed = "127.0.0.1";
  host.hostname_addr = "127.0.1.1";
  absl::StatusOr<GlooAddress> a = host.Select(World(2, 1), "node1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "10.0.0.2");  // the first interface that is up, IPv4 over fe80::
  EXPECT_EQ(a->source, "interface eth0");
}

TEST(GlooAddressTest, MultiHostTakesTheHostnameWhenItIsALocalAddress) {
  FakeHost host;
  host.hostname_addr = "192.168.5.2";
  absl::StatusOr<GlooAddress> a = host.Select(World(2, 1));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "192.168.5.2");
}

TEST(GlooAddressTest, AdvertiseAddressWinsOnEveryPath) {
  FakeHost host;
  host.variables["GLOO_SOCKET_IFNAME"] = "ib0";
  for (int local_size : {1, 2}) {
    LaunchEnv env = World(2, local_size);
    env.advertise_address = "10.0.0.2";
    absl::StatusOr<GlooAddress> a = host.Select(env);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->address, "10.0.0.2");
    EXPECT_EQ(a->source, "DEEPNET_ADVERTISE_ADDRESS");
  }
}

TEST(GlooAddressTest, AdvertiseAddressThatIsNotOfThisHostIsAnErrorNamingTheVariable) {
  FakeHost host;
  LaunchEnv env = World(2, 1);
  env.advertise_address = "10.0.0.99";
  absl::StatusOr<GlooAddress> a = host.Select(env);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("DEEPNET_ADVERTISE_ADDRESS=10.0.0.99"));
}

TEST(GlooAddressTest, SocketInterfaceIsHonouredOnEveryPath) {
  FakeHost host;
  host.routed = "10.0.0.2";
  host.variables["GLOO_SOCKET_IFNAME"] = "ib0,eth0";
  for (int local_size : {1, 2}) {
    absl::StatusOr<GlooAddress> a = host.Select(World(2, local_size), "node1");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->address, "192.168.5.2");
    EXPECT_EQ(a->source, "GLOO_SOCKET_IFNAME=ib0");
  }
}

TEST(GlooAddressTest, BadSocketInterfaceIsAnErrorNamingTheVariable) {
  FakeHost host;
  struct Case {
    const char* value;
    const char* says;
  };
  for (const Case& c : {Case{"eth7", "no interface \"eth7\""}, Case{"dn0", "is down"},
                        Case{"lo", "loopback interface"}}) {
    host.variables["GLOO_SOCKET_IFNAME"] = c.value;
    absl::StatusOr<GlooAddress> a = host.Select(World(2, 1));
    ASSERT_FALSE(a.ok()) << c.value;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("GLOO_SOCKET_IFNAME="));
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.says));
  }
  // The loopback interface is fine when every rank is on this node.
  host.variables["GLOO_SOCKET_IFNAME"] = "lo";
  absl::StatusOr<GlooAddress> a = host.Select(World(2, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
}

TEST(GlooAddressTest, MultiHostWithoutAnyUsableAddressNamesBothVariables) {
  FakeHost host;
  AddressProbe probe = host.Probe();
  probe.interfaces = [] {
    return std::vector<InterfaceAddress>{{"lo", "127.0.0.1", true, true},
                                         {"eth0", "fe80::1", false, true}};
  };
  absl::StatusOr<GlooAddress> a = SelectGlooAddress(World(2, 1), "", host.Getenv(), probe);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("DEEPNET_ADVERTISE_ADDRESS"));
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("GLOO_SOCKET_IFNAME"));
}

TEST(GlooAddressTest, SrunVariablesWithoutALocalSizeVariableGiveAMultiHostAddress) {
  // issue 16: srun's variables for rank 2 of 4 on the second of two nodes, no local-size
  // variable; the hostname resolves to loopback (Debian's /etc/hosts).
  FakeHost host;
  host.routed = "10.0.0.2";
  host.hostname_addr = "127.0.1.1";
  host.variables = {{"SLURM_PROCID", "2"},    {"SLURM_NTASKS", "4"},
                    {"SLURM_NODEID", "1"},    {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                    {"SLURM_LOCALID", "0"},   {"SLURM_JOB_ID", "16"},
                    {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500"}};
  absl::StatusOr<LaunchEnv> env = DetectLaunchEnv(host.Getenv());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_size, 2);
  absl::StatusOr<GlooAddress> a = host.Select(*env, env->master_addr);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "10.0.0.2");
  EXPECT_EQ(host.asked_route, "node1");
  // DEEPNET_ADVERTISE_ADDRESS is read on this path too.
  host.variables["DEEPNET_ADVERTISE_ADDRESS"] = "192.168.5.2";
  env = DetectLaunchEnv(host.Getenv());
  ASSERT_TRUE(env.ok()) << env.status();
  a = host.Select(*env, env->master_addr);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "192.168.5.2");
}

TEST(GlooAddressTest, AHostWithOnlyLoopbackUpKeepsItsPeersOnLoopback) {
  // Several workers on one machine without a network: no peer can be elsewhere.
  FakeHost host;
  AddressProbe probe = host.Probe();
  probe.interfaces = [] {
    return std::vector<InterfaceAddress>{{"lo", "127.0.0.1", true, true},
                                         {"eth0", "10.0.0.2", false, false}};
  };
  absl::StatusOr<GlooAddress> a = SelectGlooAddress(World(4, 2), "", host.Getenv(), probe);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->address, "127.0.0.1");
}

TEST(GlooAddressTest, TheSystemProbeSeesLoopback) {
  const std::vector<InterfaceAddress> all = SystemAddressProbe().interfaces();
  bool loopback = false;
  for (const InterfaceAddress& a : all) loopback = loopback || a.loopback;
  EXPECT_TRUE(loopback);
}

}  // namespace
}  // namespace deepnet::comm
