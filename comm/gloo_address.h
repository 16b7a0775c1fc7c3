#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/launch_env.h"

namespace deepnet::comm {

/// One address of a network interface of this host.
struct InterfaceAddress {
  std::string interface;  // "eth0"
  std::string address;    // numeric, "10.0.0.2" or "fd00::2"
  bool loopback = false;  // IFF_LOOPBACK, or a 127.0.0.0/8 or ::1 address
  bool up = false;        // IFF_UP
};

/// What SelectGlooAddress asks of the host; injectable for tests.
struct AddressProbe {
  // Every IPv4 and IPv6 address of every interface (getifaddrs).
  std::function<std::vector<InterfaceAddress>()> interfaces;
  // The local address the kernel would send from to reach `host` ("" if it cannot be
  // resolved or routed): a connected UDP socket's own address, nothing is sent.
  std::function<std::string(const std::string& host)> route_source;
  // This host's name resolved to a numeric address ("" when it does not resolve).
  std::function<std::string()> hostname_address;
};

/// The real host: getifaddrs, a connected UDP socket, gethostname + getaddrinfo.
AddressProbe SystemAddressProbe();

/// The address Gloo's sockets bind to and advertise to the peers, and why it was chosen.
struct GlooAddress {
  std::string address;
  std::string source;  // e.g. "DEEPNET_ADVERTISE_ADDRESS", "GLOO_SOCKET_IFNAME=eth0"
};

/// Picks this rank's Gloo address, first match wins:
///  1. DEEPNET_ADVERTISE_ADDRESS (env.advertise_address): used as given (an IP literal must be
///     an address of this host);
///  2. GLOO_SOCKET_IFNAME (the first name of a comma-separated list): that interface's IPv4
///     address (else its IPv6 one); it must exist, be up and, in a multi-host world, not be the
///     loopback interface;
///  3. every rank on this node (env.local_size == env.world_size): 127.0.0.1;
///  4. a multi-host world: the local address that routes to `rendezvous_host` (MASTER_ADDR or the
///     rendezvous' host), else the hostname's address, else the first interface that is up, in
///     each case only a non-loopback address of this host; 127.0.0.1 only when no interface
///     but loopback is up (then no peer can be on another host).
/// Never loopback for a multi-host world unless DEEPNET_ADVERTISE_ADDRESS says so or the host
/// has no other interface up. Errors name
/// the variable: InvalidArgument for a bad DEEPNET_ADVERTISE_ADDRESS or GLOO_SOCKET_IFNAME,
/// FailedPrecondition when a multi-host rank finds no usable address.
[[nodiscard]] absl::StatusOr<GlooAddress> SelectGlooAddress(
    const LaunchEnv& env, const std::string& rendezvous_host,
    const std::function<const char*(const char*)>& getenv = ::getenv,
    const AddressProbe& probe = SystemAddressProbe());

}  // namespace deepnet::comm
