#include "cli/data_command.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iomanip>
#include <ostream>

#include "cli/commands.h"
#include "data/l10n_corpus.h"

extern char** environ;

namespace deepnet::cli {
namespace {

constexpr const char* kBuildTag = "[corpus] ";

void PrintLocaleTable(const data::L10nCorpusSummary& summary, std::ostream& out) {
  out << std::left << std::setw(16) << "locale" << std::right << std::setw(7) << "files"
      << std::setw(10) << "train" << std::setw(8) << "valid" << std::setw(8) << "test"
      << std::setw(10) << "total"
      << "\n";
  data::L10nLocaleSummary sum;
  for (const data::L10nLocaleSummary& locale : summary.locales) {
    out << std::left << std::setw(16) << locale.locale << std::right << std::setw(7) << locale.files
        << std::setw(10) << locale.train << std::setw(8) << locale.valid << std::setw(8)
        << locale.test << std::setw(10) << locale.total() << "\n";
    sum.files += locale.files;
    sum.train += locale.train;
    sum.valid += locale.valid;
    sum.test += locale.test;
  }
  out << std::left << std::setw(16) << "all" << std::right << std::setw(7) << sum.files
      << std::setw(10) << sum.train << std::setw(8) << sum.valid << std::setw(8) << sum.test
      << std::setw(10) << sum.total() << "\n";
}

// Closes a descriptor when it goes out of scope (-1 is ignored).
struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

// Copies what arrives on the two pipes to the two streams until both reach end of file.
void Forward(int out_fd, int err_fd, std::ostream& out, std::ostream& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::ostream* streams[2] = {&out, &err};
  int open_fds = 2;
  char buffer[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;  // poll ignores negative descriptors.
        --open_fds;
        continue;
      }
      streams[i]->write(buffer, n);
      streams[i]->flush();
    }
  }
}

}  // namespace

int RunBuildCorpus(const BuildCorpusCommand& command, std::ostream& out, std::ostream& err) {
  data::L10nCorpusOptions options;
  options.roots = command.roots;
  options.out_dir = command.out_dir;
  options.locales = command.locales;
  options.min_pairs = command.min_pairs;
  options.max_pairs_per_locale = command.max_pairs_per_locale;
  options.max_source_words = command.max_source_words;
  options.drop_placeholders = command.drop_placeholders;
  options.valid_fraction = command.valid_fraction;
  options.test_fraction = command.test_fraction;
  if (absl::Status status = data::Validate(options); !status.ok()) {
    err << "deepnet data build-corpus: " << status.message() << "\n";
    return kExitBadInput;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<data::L10nCorpusSummary> summary = data::BuildL10nCorpus(options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!summary.ok()) {
    err << "deepnet data build-corpus: " << summary.status().message() << "\n";
    return kExitFailure;
  }
  PrintLocaleTable(*summary, out);
  int64_t at_least_1k = 0;
  int64_t at_least_10k = 0;
  for (const data::L10nLocaleSummary& locale : summary->locales) {
    at_least_1k += locale.total() >= 1000;
    at_least_10k += locale.total() >= 10000;
  }
  out << kBuildTag << summary->locales.size() << " locales (" << at_least_1k << " with >=1k pairs, "
      << at_least_10k << " with >=10k), " << summary->total_pairs << " pairs, "
      << summary->unique_english << " unique English sentences\n";
  if (!summary->locales_below_min.empty()) {
    out << kBuildTag << summary->locales_below_min.size()
        << " locales left out (no pairs, or fewer than min_pairs " << command.min_pairs << "):";
    for (const data::L10nLocaleSummary& locale : summary->locales_below_min) {
      out << " " << locale.locale << " (" << locale.total() << ")";
    }
    out << "\n";
  }
  if (summary->long_pairs > 0 || summary->placeholder_pairs > 0) {
    out << kBuildTag << "left out " << summary->long_pairs << " pairs over "
        << command.max_source_words << " English words and " << summary->placeholder_pairs
        << " with placeholders\n";
  }
  for (const std::string& root : summary->roots_missing) {
    out << kBuildTag << "root " << root << " does not exist (run `deepnet data fetch-l10n`?)\n";
  }
  out << kBuildTag << "files: " << summary->files_found << " found, " << summary->files_read
      << " read, " << summary->files_duplicate << " duplicates, " << summary->files_excluded_domain
      << " excluded domains, " << summary->files_out_of_scope << " other locales, "
      << summary->files_skipped.size() << " skipped\n";
  for (const data::SkippedFile& file : summary->files_skipped) {
    out << kBuildTag << "skipped " << file.path << ": " << file.reason << "\n";
  }
  const double rate = seconds > 0 ? static_cast<double>(summary->total_pairs) / seconds : 0.0;
  out << kBuildTag << "built in " << std::fixed << std::setprecision(1) << seconds << " s, "
      << std::setprecision(0) << rate << " pairs/s -> " << command.out_dir << "\n"
      << std::defaultfloat;
  return kExitOk;
}

int RunFetchL10n(const FetchL10nCommand& command, std::ostream& out, std::ostream& err) {
  struct stat st {};
  if (stat(command.script.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    err << "deepnet data fetch-l10n: " << command.script << ": no such script\n";
    return kExitBadInput;
  }
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    err << "deepnet data fetch-l10n: pipe: " << strerror(errno) << "\n";
    return kExitFailure;
  }
  FdCloser out_read{out_pipe[0]};
  FdCloser out_write{out_pipe[1]};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    err << "deepnet data fetch-l10n: pipe: " << strerror(errno) << "\n";
    return kExitFailure;
  }
  FdCloser err_read{err_pipe[0]};
  FdCloser err_write{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears O_CLOEXEC on the copies, so only stdout and stderr reach the script.
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::string bash = "bash";
  std::string script = command.script;
  std::string dir = command.l10n_dir;
  char* argv[] = {bash.data(), script.data(), dir.empty() ? nullptr : dir.data(), nullptr};
  pid_t pid = -1;
  const int spawn_error = posix_spawnp(&pid, "bash", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    err << "deepnet data fetch-l10n: cannot start bash: " << strerror(spawn_error) << "\n";
    return kExitFailure;
  }
  // Our copies of the write ends must close, or the reads below never see end of file.
  close(out_write.fd);
  out_write.fd = -1;
  close(err_write.fd);
  err_write.fd = -1;
  Forward(out_read.fd, err_read.fd, out, err);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      err << "deepnet data fetch-l10n: waitpid: " << strerror(errno) << "\n";
      return kExitFailure;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return kExitOk;
  if (WIFEXITED(status)) {
    err << "deepnet data fetch-l10n: " << command.script << " exited with status "
        << WEXITSTATUS(status) << "\n";
  } else if (WIFSIGNALED(status)) {
    err << "deepnet data fetch-l10n: " << command.script << " killed by signal " << WTERMSIG(status)
        << "\n";
  }
  return kExitFailure;
}

}  // namespace deepnet::cli
