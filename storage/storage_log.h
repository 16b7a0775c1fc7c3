#pragma once

#include <string_view>

namespace deepnet::storage {

/// Warning and error lines on the process's log (spdlog's default logger), for the LibTorch
/// targets that write to storage (checkpoint/): spdlog includes fmt, and a PyTorch 2.x package
/// ships its own fmt in the include folder every LibTorch translation unit searches first, which
/// breaks spdlog's. This target is LibTorch-free.
void LogWarning(std::string_view message);
void LogError(std::string_view message);

}  // namespace deepnet::storage
