#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/sqlite_db.h"

namespace deepnet::coordinator {

// Hands out each worker's registration epochs: strictly increasing per worker name, durable
// across coordinator restarts (a table `worker_epochs` in the coordinator's SQLite file, or in
// memory for tests), so a command from before a restart can always be told apart. Thread-safe.
class WorkerEpochStore {
 public:
  // `path` empty: in memory only.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WorkerEpochStore>> Open(
      const std::string& path);
  // The next epoch of `worker_name` (1 for a name never seen), stored before it is returned.
  [[nodiscard]] absl::StatusOr<int64_t> Next(const std::string& worker_name);

 private:
  explicit WorkerEpochStore(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}

  absl::Mutex mu_;
  std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace deepnet::coordinator
