#include "pg/rewound_wal.h"

#include <filesystem>
#include <fstream>
#include <utility>

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
    if (auto tli = parseTimelineHistoryName(n); tli && *tli > newest) newest = *tli;
    if (auto seg = parseWalSegmentName(n); seg && seg->segno > lastSegno) lastSegno = seg->segno;
  }
  if (ec) return Error{"cannot list " + walDir + ": " + ec.message()};
  auto ancestors = readTimelineAncestors(walDir, newest);
  if (!ancestors) return Error{ancestors.error()};
  const TimelineHistory history{newest, std::move(ancestors.value())};
  for (uint64_t segno = firstSegno; segno <= lastSegno; ++segno) {
    // Recovery reads each segment from the newest timeline that began in it or before:
    // the timeline of its last byte.
    const std::string name = walSegmentName(history.timelineAt(WalPosition((segno + 1) * kWalSegmentBytes)), segno);
    if (fs::file_size(walDir + "/" + name, ec) != kWalSegmentBytes || ec) return std::optional<std::string>(name);
  }
  return std::optional<std::string>();
}

}  // namespace dugong::pg
