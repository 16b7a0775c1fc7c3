#include "comm/comm_log.h"

#include <spdlog/spdlog.h>

namespace deepnet::comm {

void LogError(std::string_view message) { spdlog::error("{}", message); }

}  // namespace deepnet::comm
