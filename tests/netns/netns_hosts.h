#pragma once
// Several "hosts" on one machine for multi-host tests (ctest label `netns`): each host is a network
// namespace with loopback up and one veth link (eth0, a private 10.x.y.0/24 address) to a bridge
// that lives in a namespace of its own. Only namespaces this object made are touched: no address,
// route or interface of the machine's own namespace changes. Names carry this process's id, so
// parallel runs do not collide; namespaces left by a crashed run (their process is gone) are
// removed by the next one. The destructor kills every process left in the hosts and deletes the
// namespaces, also when a test failed half-way.
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace deepnet::testing {

// Runs `args` (execvp, no shell) and waits; returns its exit code (-1: did not start or was
// killed) and puts its stdout and stderr together in `output` when given.
int RunCommand(const std::vector<std::string>& args, std::string* output = nullptr);

class NetnsHosts {
 public:
  // "" when this process can make hosts here (root or CAP_SYS_ADMIN, `ip`, veth and bridge
  // links), else why not: the reason for GTEST_SKIP.
  static std::string WhyUnavailable();

  // Makes `count` hosts on one bridge; error() says what failed ("" when all is well).
  explicit NetnsHosts(int count);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  const std::string& error() const { return error_; }
  int count() const { return static_cast<int>(names_.size()); }
  // The namespace of host `host` (0 <= host < count()).
  const std::string& name(int host) const { return names_[host]; }
  // Its address on the bridge, e.g. "10.213.7.2".
  std::string address(int host) const;
  // The command prefix that runs a program on `host`: {"ip", "netns", "exec", name}.
  std::vector<std::string> Prefix(int host) const;
  // RunCommand on `host`.
  int Run(int host, const std::vector<std::string>& args, std::string* output = nullptr) const;
  // Runs `body` in a child forked into `host`'s network namespace (setns); its return value is
  // the child's exit code, which this returns (-1: the child could not enter the host or died).
  int RunInHost(int host, const std::function<int()>& body) const;
  // Whether a TCP connection from host `from` reaches a listener on host `to`'s address within
  // `timeout_ms` (both ends are forked children in the hosts' namespaces).
  bool CanConnect(int from, int to, int timeout_ms) const;
  // Takes `host`'s link down (its cable pulled: packets are dropped, nothing tells the peers) or
  // brings it back up; false (and error()) when `ip` failed.
  bool SetLink(int host, bool up);
  // The processes running in `host`'s namespace.
  std::vector<pid_t> Pids(int host) const;

 private:
  std::string bridge_;              // the bridge's namespace
  std::vector<std::string> names_;  // the hosts' namespaces
  std::string prefix_;              // "10.X.Y." of the hosts' /24
  std::string error_;
};

}  // namespace deepnet::testing
