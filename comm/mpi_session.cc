#include "comm/mpi_session.h"

#include <mpi.h>

#include "absl/strings/str_cat.h"

namespace deepnet::comm {
namespace {

std::string ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return absl::StrCat("level ", level);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiSession>> MpiSession::Create() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized || finalized) {
    return absl::FailedPreconditionError(
        "MPI was already initialised in this process; create exactly one MpiSession");
  }
  int provided = MPI_THREAD_SINGLE;
  if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      rc != MPI_SUCCESS) {
    return absl::InternalError(absl::StrCat("MPI_Init_thread failed with error code ", rc));
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return absl::FailedPreconditionError(absl::StrCat(
        "MPI provides only ", ThreadLevelName(provided), "; DeepNet needs MPI_THREAD_SERIALIZED"));
  }
  // Errors on the world communicator come back as codes instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiSession>(new MpiSession(rank, size));
}

MpiSession::MpiSession(int world_rank, int world_size)
    : world_rank_(world_rank), world_size_(world_size) {}

MpiSession::~MpiSession() { MPI_Finalize(); }

}  // namespace deepnet::comm
