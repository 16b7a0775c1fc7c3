#pragma once

#include <string_view>

namespace deepnet::comm {

/// Error line on the process's log (spdlog's default logger). A function of the LibTorch-free
/// deepnet_comm_rendezvous: spdlog includes fmt, and a PyTorch 2.x package ships its own fmt in
/// the include folder every LibTorch translation unit searches first, which breaks spdlog's.
void LogError(std::string_view message);

}  // namespace deepnet::comm
