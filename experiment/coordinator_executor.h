#pragma once
// `deepnet experiment run --coordinator ADDR`: each run is a job submitted to the coordinator
// with deepnetctl (so authentication, TLS and retries are deepnetctl's: --token-file,
// DEEPNET_TOKEN, DEEPNET_CA_CERT, ... as docs/CLI.md describes), followed with `deepnetctl
// watch` until it ends, its trainer's JSON lines then read back with `deepnetctl logs --stdout`.

#include <string>
#include <vector>

#include "experiment/sweep_runner.h"

namespace deepnet::experiment {

class CoordinatorExecutor : public RunExecutor {
 public:
  // `ctl_flags`: global deepnetctl flags passed before each command (--token-file F, ...).
  CoordinatorExecutor(std::string deepnetctl, std::string address,
                      std::vector<std::string> ctl_flags = {})
      : deepnetctl_(std::move(deepnetctl)),
        address_(std::move(address)),
        ctl_flags_(std::move(ctl_flags)) {}
  std::string mode() const override { return "coordinator"; }
  absl::StatusOr<RunExecution> Execute(const RunRequest& request) override;

 private:
  std::vector<std::string> Ctl(std::vector<std::string> args) const;

  std::string deepnetctl_;
  std::string address_;
  std::vector<std::string> ctl_flags_;
};

}  // namespace deepnet::experiment
