#pragma once

// Whole-file text helpers for tests that inspect or damage files on disk.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace deepnet::testing {

/// The file's bytes; empty when it cannot be read.
inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces the file's contents with `text`.
inline void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace deepnet::testing
