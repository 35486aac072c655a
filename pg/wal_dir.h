// What postgres keeps in pg_wal, read from the file system: WAL segment files named
// after their timeline and number, and a history file per timeline that began with a
// promotion ("<parent>\t<switch point>\t<reason>" per timeline it came from).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/result.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong::pg {

inline constexpr uint64_t kWalSegmentBytes = 16ull * 1024 * 1024;  // dugong runs initdb's default

// Where a WAL record of `totalLength` bytes that starts at `start` ends, as postgres counts
// it (the reader's end of record, what pg_current_wal_lsn() and pg_rewind compare): its
// bytes aligned to 8, plus the header of every page it continues on (24 bytes, 40 on a
// segment's first page; pages of 8 kB).
WalPosition walRecordEnd(WalPosition start, uint64_t totalLength);

// "000000010000000000000003": timeline 1, segment 3.
std::string walSegmentName(int64_t timeline, uint64_t segno);
struct WalSegmentName {
  int64_t timeline = 0;
  uint64_t segno = 0;
};
// nullopt for a name that is not a segment's (a history file, a .partial, a directory).
std::optional<WalSegmentName> parseWalSegmentName(const std::string& name);
// "00000003.history": timeline 3; nullopt for any other name.
std::optional<int64_t> parseTimelineHistoryName(const std::string& name);

// The timelines timeline `timeline` came from, oldest first, from its history file in
// `walDir`; none for timeline 1.
Result<std::vector<TimelineHistory::Ancestor>> readTimelineAncestors(const std::string& walDir, int64_t timeline);

// The history of the WAL up to `position` (its end): the timeline of the newest segment
// file that holds the byte before it, and that timeline's ancestors. A standby writes a
// timeline's segments only once it follows that timeline, so a history file it fetched
// but could not follow does not count.
Result<TimelineHistory> readTimelineHistory(const std::string& walDir, WalPosition position);

// The history of the WAL in `walDir` as far as it goes, read while postgres is stopped as
// well: the newest timeline any segment file is on (a promotion writes its first segment
// at once; recycled segments are named after the timeline that recycles them), and its
// ancestors. What a primary's start compares with the generation's (pg/plan/transition.h).
Result<TimelineHistory> readNewestTimelineHistory(const std::string& walDir);

}  // namespace dugong::pg
