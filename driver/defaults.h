// The defaults of the settings the driver reads: one table, for DriverOptions
// (driver/core.h) and the daemon's configuration (agent/config.h), which are the same
// settings. Each is the production value; a simulator or a test that models less (no WAL
// stream, no replication, Manatee's deposed peer waiting for a rebuild) says so where it
// sets its options.
#pragma once

#include <cstdint>

#include "statemachine/rejoin_policy.h"

namespace dugong::driver::defaults {

// What a deposed peer does on its own (docs/rejoin.md): follow the new primary as it is
// if it can, and otherwise discard what it diverged with by pg_rewind.
inline constexpr RejoinPolicy kRejoin = RejoinPolicy::kRewind;
// How long a sync waits for the old primary to stop in a planned switchover
// (docs/rejoin.md); 0 is Manatee's behaviour, no clean handover.
inline constexpr int kHandoverWaitMs = 5000;
// How long commits may wait on a sync that acknowledges nothing before the primary
// replaces it (docs/sync-replacement.md); 0: never.
inline constexpr int kSyncReplaceAfterMs = 2000;
// The state machine's hold between two such replacements, and how long a new sync may
// take to connect.
inline constexpr int kSyncReplaceHoldMs = 5000;
inline constexpr int kSyncConnectGraceMs = 10000;

}  // namespace dugong::driver::defaults
