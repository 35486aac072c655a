#include "pg/rewound_wal.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace dugong::pg {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSegmentSize = 16ull * 1024 * 1024;  // dugong runs initdb's default

std::string segmentName(uint32_t tli, uint64_t segno) {
  char name[25];
  std::snprintf(name, sizeof name, "%08X%08X%08X", tli, static_cast<uint32_t>(segno / 0x100),
                static_cast<uint32_t>(segno % 0x100));
  return name;
}

std::optional<uint64_t> parseLsn(const std::string& text) {
  unsigned hi = 0, lo = 0;
  if (std::sscanf(text.c_str(), "%X/%X", &hi, &lo) != 2) return std::nullopt;
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool isSegmentName(const std::string& n) {
  return n.size() == 24 && n.find_first_not_of("0123456789ABCDEF") == std::string::npos;
}

}  // namespace

Result<std::optional<std::string>> firstMissingWalSegment(const std::string& dataDir) {
  std::ifstream label(dataDir + "/backup_label");
  std::string line;
  std::optional<uint64_t> start;
  while (std::getline(label, line)) {
    const std::string key = "START WAL LOCATION: ";
    if (line.rfind(key, 0) == 0) start = parseLsn(line.substr(key.size()));
  }
  if (!start) return Error{"no START WAL LOCATION in " + dataDir + "/backup_label"};
  const std::string walDir = dataDir + "/pg_wal";
  // The newest timeline's history: "<tli>\t<switch point>\t<reason>" per ended timeline.
  uint32_t newest = 1;
  uint64_t lastSegno = *start / kSegmentSize;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(walDir, ec)) {
    const std::string n = entry.path().filename().string();
    unsigned tli = 0;
    if (n.size() == 16 && n.substr(8) == ".history" && std::sscanf(n.c_str(), "%8X", &tli) == 1 && tli > newest) {
      newest = tli;
    }
    if (isSegmentName(n)) {
      const uint64_t segno = std::stoull(n.substr(8, 8), nullptr, 16) * 0x100 + std::stoull(n.substr(16), nullptr, 16);
      if (segno > lastSegno) lastSegno = segno;
    }
  }
  if (ec) return Error{"cannot list " + walDir + ": " + ec.message()};
  std::map<uint32_t, uint64_t> beginOf = {{1, 0}};  // timeline -> its first LSN
  if (newest > 1) {
    char history[17];
    std::snprintf(history, sizeof history, "%08X.history", newest);
    std::ifstream in(walDir + "/" + history);
    if (!in) return Error{"cannot read " + walDir + "/" + history};
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      unsigned tli = 0;
      std::string end;
      if (!(fields >> tli >> end)) continue;
      auto lsn = parseLsn(end);
      if (lsn) beginOf[tli + 1] = *lsn;
    }
  }
  for (uint64_t segno = *start / kSegmentSize; segno <= lastSegno; ++segno) {
    // Recovery reads each segment from the newest timeline that began in it or before.
    uint32_t tli = 1;
    for (const auto& [t, begin] : beginOf) {
      if (begin / kSegmentSize <= segno) tli = t;
    }
    const std::string name = segmentName(tli, segno);
    if (fs::file_size(walDir + "/" + name, ec) != kSegmentSize || ec) return std::optional<std::string>(name);
  }
  return std::optional<std::string>();
}

}  // namespace dugong::pg
