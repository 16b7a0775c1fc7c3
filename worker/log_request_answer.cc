#include "worker/log_request_answer.h"

#include "worker/trainer_log_reader.h"

namespace deepnet::worker {

v1::LogChunk AnswerLogRequest(const v1::LogRequest& request, const std::string& work_dir,
                              bool running) {
  v1::LogChunk chunk;
  chunk.set_request_id(request.request_id());
  chunk.set_running(running);
  TrainerLogRead read;
  read.job_id = request.job_id();
  read.attempt = request.attempt();
  read.rank = request.rank();
  read.stream = request.stream() == v1::LOG_STREAM_STDOUT ? TrainerLogStream::kStdout
                                                           : TrainerLogStream::kStderr;
  read.offset = request.offset();
  read.tail_bytes = request.tail_bytes();
  read.max_bytes = request.max_bytes();
  absl::StatusOr<TrainerLogPart> part = ReadTrainerLog(work_dir, read);
  if (!part.ok()) {
    chunk.set_error_code(static_cast<int32_t>(part.status().code()));
    chunk.set_error(std::string(part.status().message()));
    return chunk;
  }
  chunk.set_offset(part->offset);
  chunk.set_size(part->size);
  *chunk.mutable_data() = std::move(part->data);
  return chunk;
}

}  // namespace deepnet::worker
