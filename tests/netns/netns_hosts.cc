#include "tests/netns/netns_hosts.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>

namespace deepnet::testing {
namespace {

constexpr char kNamePrefix[] = "dnh";  // dnh<pid>s<seq>{b,h<i>}

std::atomic<int> sequence{0};

// The IPv4 addresses of this machine's own namespace (to keep our /24 clear of them).
std::vector<std::string> OwnAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    out.push_back(text);
  }
  freeifaddrs(list);
  return out;
}

std::vector<std::string> Namespaces() {
  std::string text;
  RunCommand({"ip", "netns", "list"}, &text);
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::vector<pid_t> PidsOf(const std::string& ns) {
  std::string text;
  RunCommand({"ip", "netns", "pids", ns}, &text);
  std::vector<pid_t> out;
  std::istringstream words(text);
  for (long pid = 0; words >> pid;) {
    if (pid > 1 && pid != getpid()) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

// Kills what runs in `ns` and deletes it.
void Remove(const std::string& ns) {
  for (int round = 0; round < 50; ++round) {
    const std::vector<pid_t> pids = PidsOf(ns);
    if (pids.empty()) break;
    for (pid_t pid : pids) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  RunCommand({"ip", "netns", "delete", ns});
}

// Namespaces of ours whose process is gone (a run that crashed before its destructor).
void RemoveLeftovers() {
  for (const std::string& ns : Namespaces()) {
    if (ns.rfind(kNamePrefix, 0) != 0) continue;
    const size_t end = ns.find('s', sizeof(kNamePrefix) - 1);
    if (end == std::string::npos) continue;
    const pid_t owner = static_cast<pid_t>(
        std::strtol(ns.substr(sizeof(kNamePrefix) - 1, end).c_str(), nullptr, 10));
    if (owner > 0 && owner != getpid() && kill(owner, 0) != 0 && errno == ESRCH) Remove(ns);
  }
}

}  // namespace

int RunCommand(const std::vector<std::string>& args, std::string* output) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string NetnsHosts::WhyUnavailable() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    std::string out;
    if (RunCommand({"ip", "-V"}, &out) != 0) {
      why = "no `ip` program (iproute2, which scripts/setup.sh installs)";
      return;
    }
    const std::string probe = std::string(kNamePrefix) + std::to_string(getpid()) + "sprobe";
    if (RunCommand({"ip", "netns", "add", probe}, &out) != 0) {
      why =
          "cannot create a network namespace (needs root or CAP_SYS_ADMIN): `ip netns add`: " + out;
      return;
    }
    if (RunCommand({"ip", "-n", probe, "link", "add", "br0", "type", "bridge"}, &out) != 0) {
      why = "cannot create a bridge link in a network namespace: " + out;
    } else if (RunCommand(
                   {"ip", "-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
                   &out) != 0) {
      why = "cannot create a veth pair in a network namespace: " + out;
    }
    Remove(probe);
  });
  return why;
}

NetnsHosts::NetnsHosts(int count) {
  RemoveLeftovers();
  const int seq = sequence++;
  const std::string base =
      std::string(kNamePrefix) + std::to_string(getpid()) + "s" + std::to_string(seq);
  // A /24 in 10.200-254.*.* that no address of this machine's namespace lies in.
  const std::vector<std::string> own = OwnAddresses();
  for (int i = 0; i < 55 * 256 && prefix_.empty(); ++i) {
    const int k = (static_cast<int>(getpid()) * 7 + seq * 13 + i) % (55 * 256);
    const std::string candidate =
        "10." + std::to_string(200 + k / 256) + "." + std::to_string(k % 256) + ".";
    bool used = false;
    for (const std::string& a : own) used = used || a.rfind(candidate, 0) == 0;
    if (!used) prefix_ = candidate;
  }
  auto ip = [&](const std::vector<std::string>& args) {
    if (!error_.empty()) return;
    std::vector<std::string> command = {"ip"};
    command.insert(command.end(), args.begin(), args.end());
    std::string out;
    if (RunCommand(command, &out) != 0) {
      error_ = "`";
      for (const std::string& a : command) error_ += a + " ";
      error_ += "` failed: " + out;
    }
  };
  bridge_ = base + "b";
  ip({"netns", "add", bridge_});
  if (!error_.empty()) {
    bridge_.clear();
    return;
  }
  ip({"-n", bridge_, "link", "add", "br0", "type", "bridge"});
  ip({"-n", bridge_, "link", "set", "br0", "up"});
  for (int h = 0; h < count && error_.empty(); ++h) {
    const std::string ns = base + "h" + std::to_string(h);
    const std::string veth = "v" + std::to_string(h);
    ip({"netns", "add", ns});
    if (!error_.empty()) break;
    names_.push_back(ns);
    ip({"-n", ns, "link", "set", "lo", "up"});
    // Both ends are made in the bridge's namespace; one moves into the host as eth0.
    ip({"-n", bridge_, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns});
    ip({"-n", bridge_, "link", "set", veth, "master", "br0"});
    ip({"-n", bridge_, "link", "set", veth, "up"});
    ip({"-n", ns, "addr", "add", address(h) + "/24", "dev", "eth0"});
    ip({"-n", ns, "link", "set", "eth0", "up"});
  }
}

NetnsHosts::~NetnsHosts() {
  for (const std::string& ns : names_) Remove(ns);
  if (!bridge_.empty()) Remove(bridge_);
}

std::string NetnsHosts::address(int host) const { return prefix_ + std::to_string(host + 2); }

std::vector<std::string> NetnsHosts::Prefix(int host) const {
  return {"ip", "netns", "exec", names_[host]};
}

int NetnsHosts::Run(int host, const std::vector<std::string>& args, std::string* output) const {
  std::vector<std::string> command = Prefix(host);
  command.insert(command.end(), args.begin(), args.end());
  return RunCommand(command, output);
}

bool NetnsHosts::SetLink(int host, bool up) {
  std::string out;
  const int code = RunCommand(
      {"ip", "-n", bridge_, "link", "set", "v" + std::to_string(host), up ? "up" : "down"}, &out);
  if (code != 0) error_ = "cannot set host " + std::to_string(host) + "'s link: " + out;
  return code == 0;
}

int NetnsHosts::RunInHost(int host, const std::function<int()>& body) const {
  const std::string path = "/var/run/netns/" + names_[host];  // no allocation after fork
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(125);
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool NetnsHosts::CanConnect(int from, int to, int timeout_ms) const {
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(7);
  inet_pton(AF_INET, address(to).c_str(), &target.sin_addr);
  int ready[2];
  if (pipe(ready) != 0) return false;
  // The listener: accepts one connection or gives up after the timeout (and a margin).
  const pid_t listener = fork();
  if (listener == 0) {
    close(ready[0]);
    _exit(RunInHost(to, [&] {
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      const int one = 1;
      setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (bind(s, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0 || listen(s, 1) != 0) {
        return 2;
      }
      (void)!write(ready[1], "x", 1);
      pollfd p{s, POLLIN, 0};
      return poll(&p, 1, timeout_ms + 2000) == 1 && accept(s, nullptr, nullptr) >= 0 ? 0 : 1;
    }));
  }
  close(ready[1]);
  char byte = 0;
  const bool listening = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  const int connected = !listening ? 1 : RunInHost(from, [&] {
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0) return 0;
    if (errno != EINPROGRESS) return 1;
    pollfd p{s, POLLOUT, 0};
    int error = 1;
    socklen_t length = sizeof(error);
    if (poll(&p, 1, timeout_ms) != 1) return 1;
    getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &length);
    return error == 0 ? 0 : 1;
  });
  kill(listener, SIGKILL);
  waitpid(listener, nullptr, 0);
  return connected == 0;
}

std::vector<pid_t> NetnsHosts::Pids(int host) const { return PidsOf(names_[host]); }

}  // namespace deepnet::testing
