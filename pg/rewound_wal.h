// After pg_rewind: does the rewound data directory hold every WAL segment its recovery
// reads before it can stream? Recovery starts at backup_label's START WAL LOCATION and
// reads each segment from the newest timeline that had begun by then (the timeline
// history in pg_wal); pg_rewind copies the source's pg_wal as it is, so a segment the
// source had already removed (no slot or wal_keep_size kept it) leaves a gap that no
// stream can fill: such a standby never starts.
#pragma once

#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::pg {

// The first segment file missing between the start of recovery and the last segment of
// `walDir`, or nullopt when there is none. An error when backup_label or a history file
// cannot be read.
Result<std::optional<std::string>> firstMissingWalSegment(const std::string& dataDir);

}  // namespace dugong::pg
