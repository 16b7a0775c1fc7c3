#pragma once
// Secrets the coordinator makes and compares: random session secrets and keys, and comparison in
// constant time (so a response's timing does not reveal how much of a guess was right).

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace deepnet::coordinator {

// `bytes` bytes from the operating system's cryptographic random source, as 2×bytes lowercase
// hex digits. INTERNAL when the source fails (never a weaker fallback).
[[nodiscard]] absl::StatusOr<std::string> RandomHex(size_t bytes);

// Equal contents, in time that depends on the lengths only, not on where the bytes differ.
bool ConstantTimeEquals(absl::string_view known, absl::string_view presented);

}  // namespace deepnet::coordinator
