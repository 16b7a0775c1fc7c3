#include "comm/gloo_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace deepnet::comm {
namespace {

constexpr char kAdvertiseVariable[] = "DEEPNET_ADVERTISE_ADDRESS";
constexpr char kInterfaceVariable[] = "GLOO_SOCKET_IFNAME";

std::string Numeric(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof(text));
  }
  return text;
}

bool IsLoopbackAddress(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1";
}

bool IsIpLiteral(const std::string& text) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

// The first address that is not link-local IPv6 (fe80::, unusable without a scope id).
std::string Usable(const std::vector<InterfaceAddress>& all, const std::string& interface) {
  std::string v6;
  for (const InterfaceAddress& a : all) {
    if (a.interface != interface) continue;
    if (a.address.find(':') == std::string::npos) return a.address;
    if (v6.empty() && a.address.rfind("fe80:", 0) != 0) v6 = a.address;
  }
  return v6;
}

bool IsLocalNonLoopback(const std::vector<InterfaceAddress>& all, const std::string& address) {
  if (address.empty() || IsLoopbackAddress(address)) return false;
  return std::any_of(all.begin(), all.end(), [&](const InterfaceAddress& a) {
    return a.address == address && a.up && !a.loopback;
  });
}

std::string Describe(const LaunchEnv& env) {
  return absl::StrCat("rank ", env.rank, " of ", env.world_size, " (", env.local_size,
                      " on this node, launcher \"", env.launcher, "\")");
}

}  // namespace

AddressProbe SystemAddressProbe() {
  AddressProbe probe;
  probe.interfaces = [] {
    std::vector<InterfaceAddress> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr ||
          (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
        continue;
      }
      InterfaceAddress a;
      a.interface = i->ifa_name;
      a.address = Numeric(i->ifa_addr);
      a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0 || IsLoopbackAddress(a.address);
      a.up = (i->ifa_flags & IFF_UP) != 0;
      out.push_back(std::move(a));
    }
    freeifaddrs(list);
    return out;
  };
  probe.route_source = [](const std::string& host) -> std::string {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    if (host.empty() || getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
    std::string source;
    for (addrinfo* a = found; a != nullptr && source.empty(); a = a->ai_next) {
      const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      sockaddr_storage self{};
      socklen_t length = sizeof(self);
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
          getsockname(fd, reinterpret_cast<sockaddr*>(&self), &length) == 0) {
        source = Numeric(reinterpret_cast<sockaddr*>(&self));
      }
      close(fd);
    }
    freeaddrinfo(found);
    return source;
  };
  probe.hostname_address = []() -> std::string {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) return "";
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(name, nullptr, &hints, &found) != 0) return "";
    std::string address = found != nullptr ? Numeric(found->ai_addr) : "";
    freeaddrinfo(found);
    return address;
  };
  return probe;
}

absl::StatusOr<GlooAddress> SelectGlooAddress(const LaunchEnv& env,
                                              const std::string& rendezvous_host,
                                              const std::function<const char*(const char*)>& getenv,
                                              const AddressProbe& probe) {
  const bool multi_host = env.local_size < env.world_size;
  const std::vector<InterfaceAddress> interfaces = probe.interfaces();
  if (!env.advertise_address.empty()) {
    const std::string& address = env.advertise_address;
    if (IsIpLiteral(address) &&
        std::none_of(interfaces.begin(), interfaces.end(),
                     [&](const InterfaceAddress& a) { return a.address == address; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(kAdvertiseVariable, "=", address, " is not an address of this host (",
                       Describe(env), "): Gloo can only bind an address of its own host"));
    }
    return GlooAddress{address, kAdvertiseVariable};
  }
  if (const char* value = getenv(kInterfaceVariable); value != nullptr && *value != '\0') {
    const std::string list = value;
    const std::string name = list.substr(0, list.find(','));
    std::vector<std::string> names;
    bool exists = false, up = false, loopback = false;
    for (const InterfaceAddress& a : interfaces) {
      if (std::find(names.begin(), names.end(), a.interface) == names.end()) {
        names.push_back(a.interface);
      }
      if (a.interface != name) continue;
      exists = true;
      up = up || a.up;
      loopback = loopback || a.loopback;
    }
    const std::string address = Usable(interfaces, name);
    if (!exists || address.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kInterfaceVariable, "=", list, ": this host has no interface \"", name,
                       "\" with an address (it has: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!up) {
      return absl::InvalidArgumentError(
          absl::StrCat(kInterfaceVariable, "=", list, ": interface \"", name, "\" is down"));
    }
    if (loopback && multi_host) {
      return absl::InvalidArgumentError(absl::StrCat(kInterfaceVariable, "=", list, ": \"", name,
                                                     "\" is the loopback interface, but ",
                                                     Describe(env), " has peers on other hosts"));
    }
    return GlooAddress{address, absl::StrCat(kInterfaceVariable, "=", name)};
  }
  if (!multi_host) {
    return GlooAddress{"127.0.0.1", absl::StrCat("all ", env.world_size, " ranks on this node")};
  }
  if (const std::string routed = probe.route_source(rendezvous_host);
      IsLocalNonLoopback(interfaces, routed)) {
    return GlooAddress{routed, absl::StrCat("the route to the rendezvous host ", rendezvous_host)};
  }
  if (const std::string named = probe.hostname_address(); IsLocalNonLoopback(interfaces, named)) {
    return GlooAddress{named, "the hostname's address"};
  }
  bool any_up = false;
  for (const InterfaceAddress& a : interfaces) {
    if (a.up && !a.loopback) {
      any_up = true;
      const std::string address = Usable(interfaces, a.interface);
      if (!address.empty()) return GlooAddress{address, "interface " + a.interface};
    }
  }
  // A host with nothing but loopback reaches no other host: its peers are all here (several
  // deepnet-worker daemons on one machine without a network).
  if (!any_up) return GlooAddress{"127.0.0.1", "no interface but loopback is up"};
  return absl::FailedPreconditionError(
      absl::StrCat(Describe(env),
                   " has peers on other hosts but this host has no usable non-loopback address "
                   "(none routes to the rendezvous host \"",
                   rendezvous_host,
                   "\", the hostname does not "
                   "resolve to one, no interface that is up has a usable address); set ",
                   kAdvertiseVariable, " or ", kInterfaceVariable));
}

}  // namespace deepnet::comm
