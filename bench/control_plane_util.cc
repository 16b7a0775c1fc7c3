#include "bench/control_plane_util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "tests/integration/service_cluster.h"

namespace deepnet::bench {

nlohmann::json Summary(std::vector<double> samples) {
  if (samples.empty()) return {{"n", 0}};
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) { return samples[static_cast<size_t>(q * (samples.size() - 1))]; };
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  return {{"n", samples.size()}, {"p50_ms", at(0.5)}, {"p99_ms", at(0.99)},
          {"max_ms", samples.back()}, {"mean_ms", mean}};
}

double CpuSeconds(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : "/proc/" + std::to_string(pid) + "/stat";
  const std::string stat = testing::Slurp(path);
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  // After "pid (comm)": field 3 (state) ... field 14 utime, 15 stime.
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  double utime = -1, stime = -1;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

namespace {
int64_t StatusField(pid_t pid, const std::string& key) {
  std::ifstream in(pid == 0 ? "/proc/self/status" : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;
  }
  return -1;
}
}  // namespace

int64_t RssBytes(pid_t pid) { return StatusField(pid, "VmRSS"); }
int64_t PeakRssBytes(pid_t pid) { return StatusField(pid, "VmHWM"); }

CpuMeter::CpuMeter(pid_t pid)
    : pid_(pid), cpu0_(CpuSeconds(pid)), t0_(std::chrono::steady_clock::now()) {}

double CpuMeter::Percent() const {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return wall > 0 ? 100.0 * (CpuSeconds(pid_) - cpu0_) / wall : 0.0;
}

double PrometheusValue(const std::string& page, const std::string& name) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

UnaryProbe::UnaryProbe(const std::string& address) : health_(OwnChannel(address)) {}

double UnaryProbe::RoundTripMs() {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  const auto start = std::chrono::steady_clock::now();
  const rpc::HealthAnswer answer = health_.Check(deadline);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!answer.status.ok()) {
    std::cerr << "Health/Check: " << answer.status.error_code() << " "
              << answer.status.error_message() << "\n";
    return -1;
  }
  return ms;
}

CoordinatorProcess::CoordinatorProcess(std::string binary, std::string dir)
    : binary_(std::move(binary)), dir_(std::move(dir)) {}

bool CoordinatorProcess::Start(const std::vector<std::string>& extra) {
  const std::string port_file = dir_ + "/coordinator.ports";
  std::vector<std::string> args = {binary_, "--listen", "127.0.0.1:0", "--metrics-listen",
                                   "127.0.0.1:0", "--db", dir_ + "/coordinator.db",
                                   "--port-file", port_file};
  args.insert(args.end(), extra.begin(), extra.end());
  child_ = std::make_unique<testing::Child>(args, dir_ + "/coordinator.log");
  if (!testing::WaitFor([&] { return std::filesystem::exists(port_file); },
                        std::chrono::seconds(30))) {
    std::cerr << "deepnet-coordinator did not start:\n" << LogTail(4000) << "\n";
    return false;
  }
  std::ifstream in(port_file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("grpc=", 0) == 0) grpc_port_ = std::stoi(line.substr(5));
    if (line.rfind("metrics=", 0) == 0) metrics_port_ = std::stoi(line.substr(8));
  }
  return grpc_port_ > 0 && metrics_port_ > 0;
}

std::string CoordinatorProcess::Metrics() const {
  return testing::HttpGet(metrics_port_, "/metrics");
}

std::string CoordinatorProcess::LogTail(size_t bytes) const {
  const std::string log = testing::Slurp(dir_ + "/coordinator.log");
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  if (path_.empty()) {
    std::cerr << "cannot create a folder like " << pattern << "\n";
    std::exit(1);
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  if (std::getenv("DEEPNET_KEEP_BENCH_DIR") == nullptr) std::filesystem::remove_all(path_, ec);
}

}  // namespace deepnet::bench
