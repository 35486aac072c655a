#include "pg/wal_dir.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dugong::pg {

namespace {
constexpr uint64_t kSegmentsPerId = 0x100000000ull / kWalSegmentBytes;
}

WalPosition walRecordEnd(WalPosition start, uint64_t totalLength) {
  constexpr uint64_t kPage = 8192;
  constexpr uint64_t kShortHeader = 24;
  constexpr uint64_t kLongHeader = 40;
  auto align = [](uint64_t n) { return (n + 7) & ~uint64_t{7}; };
  uint64_t pos = start.value();
  uint64_t left = totalLength;
  const uint64_t onFirstPage = kPage - pos % kPage;
  if (left <= onFirstPage) return WalPosition(pos + align(left));
  left -= onFirstPage;
  pos += onFirstPage;
  for (;;) {
    const uint64_t header = pos % kWalSegmentBytes == 0 ? kLongHeader : kShortHeader;
    const uint64_t room = kPage - header;
    if (left <= room) return WalPosition(pos + header + align(left));
    left -= room;
    pos += kPage;
  }
}

std::string walSegmentName(int64_t timeline, uint64_t segno) {
  char name[25];
  std::snprintf(name, sizeof name, "%08X%08X%08X", static_cast<uint32_t>(timeline),
                static_cast<uint32_t>(segno / kSegmentsPerId), static_cast<uint32_t>(segno % kSegmentsPerId));
  return name;
}

std::optional<WalSegmentName> parseWalSegmentName(const std::string& name) {
  if (name.size() != 24 || name.find_first_not_of("0123456789ABCDEF") != std::string::npos) return std::nullopt;
  WalSegmentName out;
  out.timeline = static_cast<int64_t>(std::stoull(name.substr(0, 8), nullptr, 16));
  out.segno = std::stoull(name.substr(8, 8), nullptr, 16) * kSegmentsPerId + std::stoull(name.substr(16), nullptr, 16);
  return out;
}

std::optional<int64_t> parseTimelineHistoryName(const std::string& name) {
  if (name.size() != 16 || name.compare(8, 8, ".history") != 0 ||
      name.find_first_not_of("0123456789ABCDEF") != 8) {
    return std::nullopt;
  }
  return static_cast<int64_t>(std::stoull(name.substr(0, 8), nullptr, 16));
}

Result<std::vector<TimelineHistory::Ancestor>> readTimelineAncestors(const std::string& walDir, int64_t timeline) {
  std::vector<TimelineHistory::Ancestor> out;
  if (timeline <= 1) return out;
  char name[17];
  std::snprintf(name, sizeof name, "%08X.history", static_cast<uint32_t>(timeline));
  const std::string path = walDir + "/" + name;
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int64_t parent = 0;
    std::string end;
    if (!(fields >> parent >> end)) return Error{path + ": cannot parse \"" + line + "\""};
    auto lsn = WalPosition::parse(end);
    if (!lsn || parent < 1 || parent >= timeline) return Error{path + ": cannot parse \"" + line + "\""};
    out.push_back({parent, lsn.value()});
  }
  return out;
}

namespace {

// The newest timeline of the segment files in `walDir` (those of segment `segno` only,
// when given), with its ancestors.
Result<TimelineHistory> newestSegmentsHistory(const std::string& walDir, std::optional<uint64_t> segno) {
  TimelineHistory out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(walDir, ec)) {
    auto seg = parseWalSegmentName(entry.path().filename().string());
    if (seg && (!segno || seg->segno == *segno) && seg->timeline > out.timeline) out.timeline = seg->timeline;
  }
  if (ec) return Error{"cannot list " + walDir + ": " + ec.message()};
  if (out.timeline == 0) return Error{"no segment file in " + walDir};
  auto ancestors = readTimelineAncestors(walDir, out.timeline);
  if (!ancestors) return Error{ancestors.error()};
  out.ancestors = std::move(ancestors.value());
  return out;
}

}  // namespace

Result<TimelineHistory> readTimelineHistory(const std::string& walDir, WalPosition position) {
  if (position.value() == 0) return Error{"no WAL to read the timeline of"};
  auto h = newestSegmentsHistory(walDir, (position.value() - 1) / kWalSegmentBytes);
  if (!h) return Error{h.error() + " holds WAL position " + position.toString()};
  return h;
}

Result<TimelineHistory> readNewestTimelineHistory(const std::string& walDir) {
  return newestSegmentsHistory(walDir, std::nullopt);
}

}  // namespace dugong::pg
