#include "pg/rewound_wal.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "pg/wal_dir.h"

namespace dugong::pg {

namespace fs = std::filesystem;

Result<std::optional<std::string>> firstMissingWalSegment(const std::string& dataDir) {
  std::ifstream label(dataDir + "/backup_label");
  std::string line;
  std::optional<WalPosition> start;
  while (std::getline(label, line)) {
    const std::string key = "START WAL LOCATION: ";
    if (line.rfind(key, 0) != 0) continue;
    // "0/2000028 (file 000000010000000000000002)"
    auto lsn = WalPosition::parse(line.substr(key.size(), line.find(' ', key.size()) - key.size()));
    if (lsn) start = lsn.value();
  }
  if (!start) return Error{"no START WAL LOCATION in " + dataDir + "/backup_label"};
  const std::string walDir = dataDir + "/pg_wal";
  int64_t newest = 1;
  uint64_t firstSegno = start->value() / kWalSegmentBytes;
  uint64_t lastSegno = firstSegno;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(walDir, ec)) {
    const std::string n = entry.path().filename().string();
    unsigned tli = 0;
    if (n.size() == 16 && n.substr(8) == ".history" && std::sscanf(n.c_str(), "%8X", &tli) == 1 && tli > newest) {
      newest = tli;
    }
    if (auto seg = parseWalSegmentName(n); seg && seg->segno > lastSegno) lastSegno = seg->segno;
  }
  if (ec) return Error{"cannot list " + walDir + ": " + ec.message()};
  auto ancestors = readTimelineAncestors(walDir, newest);
  if (!ancestors) return Error{ancestors.error()};
  // Each timeline begins where the one before it ended.
  std::vector<std::pair<int64_t, uint64_t>> beginOf = {{ancestors->empty() ? newest : ancestors->front().timeline, 0}};
  for (size_t i = 0; i < ancestors->size(); ++i) {
    const int64_t next = i + 1 < ancestors->size() ? (*ancestors)[i + 1].timeline : newest;
    beginOf.emplace_back(next, (*ancestors)[i].end.value());
  }
  for (uint64_t segno = firstSegno; segno <= lastSegno; ++segno) {
    // Recovery reads each segment from the newest timeline that began in it or before.
    int64_t tli = beginOf.front().first;
    for (const auto& [t, begin] : beginOf) {
      if (begin / kWalSegmentBytes <= segno) tli = t;
    }
    const std::string name = walSegmentName(tli, segno);
    if (fs::file_size(walDir + "/" + name, ec) != kWalSegmentBytes || ec) return std::optional<std::string>(name);
  }
  return std::optional<std::string>();
}

}  // namespace dugong::pg
