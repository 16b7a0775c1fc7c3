#pragma once

// Golden BLEU/chrF vectors in tests/data/bleu_golden (scores printed by sacreBLEU 2.6.0; its
// README says how they were made). DEEPNET_BLEU_GOLDEN_DIR is set by tests/CMakeLists.txt; a
// missing folder is a test failure.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/unicode_text.h"

namespace deepnet::data::testing {

struct GoldenCase {
  std::string name;
  double bleu = 0.0;
  double chrf2 = 0.0;
  std::vector<std::string> hyps;
  std::vector<std::string> refs;
};

inline std::filesystem::path GoldenDir() { return std::filesystem::path(DEEPNET_BLEU_GOLDEN_DIR); }

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every case of scores.tsv with its hypothesis and reference lines, split as sacreBLEU reads
// files. Records a failure (the caller should ASSERT on the size) when anything is missing.
inline std::vector<GoldenCase> LoadGoldenCases() {
  std::vector<GoldenCase> cases;
  const std::filesystem::path dir = GoldenDir();
  if (!std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "golden BLEU vectors not found at " << dir;
    return cases;
  }
  std::istringstream tsv(ReadWholeFile(dir / "scores.tsv"));
  std::string line;
  std::getline(tsv, line);
  EXPECT_EQ(line, "name\tbleu\tchrf2") << "unexpected scores.tsv header";
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    GoldenCase c;
    std::istringstream fields(line);
    if (!(fields >> c.name >> c.bleu >> c.chrf2)) {
      ADD_FAILURE() << "bad scores.tsv line: " << line;
      continue;
    }
    c.hyps = SplitScoringLines(ReadWholeFile(dir / (c.name + ".hyp")));
    c.refs = SplitScoringLines(ReadWholeFile(dir / (c.name + ".ref")));
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace deepnet::data::testing
