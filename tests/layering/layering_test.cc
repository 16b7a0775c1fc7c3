// The layering table of docs/ARCHITECTURE.md ("Targets and layering") against the build: every
// library and program has a row naming its folder and exactly the project targets it links,
// and every link points to a row above its own (lower layers first), so the documented graph
// has no cycle and no arrow running back up. CMake writes the build's side
// (cmake/layering.cmake, deepnet_write_link_table); per-target include folders make the
// compiler hold the code to the same links.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace deepnet::layering {
namespace {

struct Room {
  std::string folder;
  std::set<std::string> links;
  size_t row = 0;  // Position in the documented table, lowest layer first.
};

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// The `...` spans of a table cell.
std::vector<std::string> CodeSpans(const std::string& cell) {
  std::vector<std::string> spans;
  size_t pos = 0;
  while ((pos = cell.find('`', pos)) != std::string::npos) {
    const size_t end = cell.find('`', pos + 1);
    if (end == std::string::npos) break;
    spans.push_back(cell.substr(pos + 1, end - pos - 1));
    pos = end + 1;
  }
  return spans;
}

// target -> room, from the build: "<target> <folder> <dep,dep,...>" per line.
std::map<std::string, Room> ReadBuild(const std::string& path) {
  std::map<std::string, Room> rooms;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string target, folder, deps;
    fields >> target >> folder >> deps;
    if (target.empty()) continue;
    Room& room = rooms[target];
    room.folder = folder + "/";
    std::istringstream list(deps);
    for (std::string dep; std::getline(list, dep, ',');) {
      if (!dep.empty()) room.links.insert(dep);
    }
  }
  return rooms;
}

// target -> room, from the first table after the "## Targets and layering" heading. Columns:
// target | folder | our targets it links | ...
std::map<std::string, Room> ReadDocs(const std::string& path, std::vector<std::string>* errors) {
  std::map<std::string, Room> rooms;
  std::ifstream in(path);
  std::string line;
  bool in_section = false;
  bool in_table = false;
  size_t row = 0;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Targets and layering";
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    std::vector<std::string> cells;
    std::istringstream split(line.substr(1));
    for (std::string cell; std::getline(split, cell, '|');) cells.push_back(Trim(cell));
    if (cells.size() < 3 || cells[0] == "target" || cells[0].rfind("---", 0) == 0) continue;
    const std::vector<std::string> names = CodeSpans(cells[0]);
    const std::vector<std::string> folders = CodeSpans(cells[1]);
    if (names.size() != 1 || folders.size() != 1) {
      errors->push_back("row without one `target` and one `folder/`: " + line);
      continue;
    }
    if (rooms.count(names[0]) != 0) errors->push_back("two rows for " + names[0]);
    Room& room = rooms[names[0]];
    room.folder = folders[0];
    room.row = ++row;
    for (const std::string& link : CodeSpans(cells[2])) room.links.insert(link);
  }
  return rooms;
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "(none)" : out;
}

TEST(LayeringTest, ArchitectureTableMatchesTheBuildsLinks) {
  const std::map<std::string, Room> built = ReadBuild(DEEPNET_LINK_TABLE);
  ASSERT_FALSE(built.empty()) << "no targets in " << DEEPNET_LINK_TABLE;
  std::vector<std::string> errors;
  const std::map<std::string, Room> documented = ReadDocs(DEEPNET_ARCHITECTURE_MD, &errors);
  ASSERT_FALSE(documented.empty()) << "no layering table in " << DEEPNET_ARCHITECTURE_MD;

  for (const auto& [target, room] : built) {
    auto it = documented.find(target);
    if (it == documented.end()) {
      errors.push_back(target + " (" + room.folder + ") has no row in the table");
      continue;
    }
    if (it->second.folder != room.folder) {
      errors.push_back(target + ": the table says folder " + it->second.folder +
                       ", the build defines it in " + room.folder);
    }
    if (it->second.links != room.links) {
      errors.push_back(target + ": the table says it links " + Join(it->second.links) +
                       ", the build links " + Join(room.links));
    }
  }
  for (const auto& [target, room] : documented) {
    if (built.count(target) == 0) errors.push_back(target + ": in the table, not in the build");
    for (const std::string& link : room.links) {
      auto lower = documented.find(link);
      if (lower != documented.end() && lower->second.row >= room.row) {
        errors.push_back(target + " links " + link + ", which is not above it in the table");
      }
    }
  }
  for (const std::string& error : errors) ADD_FAILURE() << error;
}

}  // namespace
}  // namespace deepnet::layering
