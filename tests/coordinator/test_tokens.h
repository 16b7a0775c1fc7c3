#pragma once

// Bearer tokens that the coordinator tests write into their tokens files. Shared, not defined
// per file, because the test files of one binary are compiled together (cmake/test_unity.cmake).

namespace deepnet::coordinator {

inline constexpr char kAlice[] = "alice-token-0123456789";
inline constexpr char kBob[] = "bob-token-012345678901";
inline constexpr char kRoot[] = "root-token-0123456789a";

}  // namespace deepnet::coordinator
