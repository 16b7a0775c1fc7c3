#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace deepnet::comm {

/// Owns MPI's initialisation: Create() calls MPI_Init_thread asking for MPI_THREAD_SERIALIZED
/// (one thread at a time calls MPI), the destructor calls MPI_Finalize. At most one per process,
/// created first in main when the backend is mpi and destroyed after every MpiCommunicator.
/// Not copyable or movable. Thread-compatible.
class MpiSession {
 public:
  // FailedPrecondition when MPI was initialised or finalised before, or when the library does
  // not provide MPI_THREAD_SERIALIZED; Internal when MPI_Init_thread fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MpiSession>> Create();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  MpiSession(MpiSession&&) = delete;
  MpiSession& operator=(MpiSession&&) = delete;

  // Rank and size of MPI_COMM_WORLD.
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  MpiSession(int world_rank, int world_size);

  int world_rank_;
  int world_size_;
};

}  // namespace deepnet::comm
