#include "storage/storage_log.h"

#include <spdlog/spdlog.h>

namespace deepnet::storage {

void LogWarning(std::string_view message) { spdlog::warn("{}", message); }
void LogError(std::string_view message) { spdlog::error("{}", message); }

}  // namespace deepnet::storage
