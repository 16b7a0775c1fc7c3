#pragma once
// Helpers of the worker daemon tests: a temporary folder, a fake trainer script, and process
// liveness from /proc.

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

namespace deepnet::worker::testing {

// Liveness bound of the waits below: far above what any step takes, only against hangs.
constexpr auto kLiveness = std::chrono::seconds(30);

// A fresh folder under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet_worker_test_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Stands in for `deepnet train --config FILE --log-format json`. It records its arguments,
// DEEPNET_* environment and CUDA_VISIBLE_DEVICES, the names of all its variables (names-RANK), pid and uid under $FAKE_DIR (files ending in
// -RANK), whether it could write the file $FAKE_TOUCH (touch-RANK: yes/no), prints two step lines
// and a checkpoint line like the real trainer, one stderr line, optionally starts a grandchild
// that ignores SIGTERM ($FAKE_GRANDCHILD), then per $FAKE_MODE: "exit" ($FAKE_EXIT_CODE),
// "kill" (SIGKILLs itself), "ignore-term" (runs until SIGKILLed), else runs until SIGTERM and
// exits 143 like the trainer.
inline constexpr char kFakeTrainer[] = R"(#!/bin/sh
echo "$*" > "$FAKE_DIR/args-$DEEPNET_RANK"
env | grep -E '^(DEEPNET_|CUDA_VISIBLE_DEVICES=)' | sort > "$FAKE_DIR/env-$DEEPNET_RANK"
env | cut -d= -f1 | sort > "$FAKE_DIR/names-$DEEPNET_RANK"
echo "$$" > "$FAKE_DIR/pid-$DEEPNET_RANK"
id -u > "$FAKE_DIR/uid-$DEEPNET_RANK"
if [ -n "$FAKE_TOUCH" ]; then
  if (echo x > "$FAKE_TOUCH") 2>/dev/null; then echo yes; else echo no; fi > "$FAKE_DIR/touch-$DEEPNET_RANK"
fi
echo '{"event":"start","message":"fake trainer"}'
echo '{"event":"step","step":10,"loss":2.5,"nll":2.25,"lr":0.001,"grad_norm":1.5,"tokens_per_s":1000.0,"update_norm":null}'
echo '{"event":"probe","step":15,"update_norm":0.25,"f0_norm":2.0,"update_norm_relative":0.125,"logits_update_norm":null,"logits_f0_norm":null,"logits_update_norm_relative":null}'
echo '{"event":"diagnostics","step":20,"layers":[],"summary":{"ln_input_norm":{"min":1.0,"max":3.0,"mean":2.0,"p50":2.0,"p90":2.8},"grad_norm":{"min":0.1,"max":0.3,"mean":0.2,"p50":0.2,"p90":0.28},"other_grad_norm":0.5,"layers":2}}'
echo '{"event":"step","step":20,"loss":2.0,"nll":1.75,"lr":0.002,"grad_norm":1.25,"tokens_per_s":1100.0,"update_norm":0.5}'
echo '{"event":"checkpoint","message":"saved /ckpt/step_0000020","step":20,"path":"/ckpt/step_0000020"}'
echo "fake trainer rank $DEEPNET_RANK: stderr line" >&2
if [ -n "$FAKE_GRANDCHILD" ]; then
  (trap '' TERM; exec sleep 300) &
  echo "$!" > "$FAKE_DIR/grandchild-$DEEPNET_RANK"
fi
case "$FAKE_MODE" in
  exit) exit "${FAKE_EXIT_CODE:-0}" ;;
  kill) kill -KILL $$ ;;
  ignore-term) trap '' TERM ;;
  *) trap 'echo "fake trainer: SIGTERM" >&2; exit 143' TERM ;;
esac
echo ready > "$FAKE_DIR/ready-$DEEPNET_RANK"
while true; do sleep 1; done
)";

// Writes kFakeTrainer as an executable file in `dir`; returns its path.
inline std::string WriteFakeTrainer(const std::string& dir) {
  const std::string path = dir + "/fake_trainer.sh";
  std::ofstream(path) << kFakeTrainer;
  chmod(path.c_str(), 0755);
  return path;
}

// Whether `pid` is a live (not zombie) process.
inline bool ProcessAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Polls `done` every 10 ms until it holds or kLiveness passes.
inline bool WaitUntil(const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + kLiveness;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The pid recorded in `path` (0 when missing).
inline pid_t PidIn(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// SIGKILLs the process whose pid is in `path`, if any (test teardown safety net).
inline void KillPidIn(const std::string& path) {
  const pid_t pid = PidIn(path);
  if (pid > 0 && ProcessAlive(pid)) kill(pid, SIGKILL);
}

}  // namespace deepnet::worker::testing
