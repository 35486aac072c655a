// The settings hot standby needs (pg/hot_standby.h) during a rolling restart. A standby's
// agent raises them, before every start, to the floor its pg_control holds: the primary's
// values as the standby last replayed them. A standby restarted before it has replayed
// the primary's lowered values therefore keeps the old, higher ones (operator review
// P15); `restart --rolling` waits for that replay, and flags a peer that runs other
// values than the cluster's configuration. Pure: they look at a peer's /state only.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ops/cluster_view.h"

namespace dugong::adm {

// The hot-standby values `p`'s postgres runs (its /state's postgres.hotStandbyValues).
std::map<std::string, long> runningHotStandbyValues(const PeerView& p);

// A hot-standby setting `p` runs at another value than the configured one.
struct HotStandbyMismatch {
  std::string name;
  long running = 0;
  // The configured value ("90"), or "postgres' default" when neither the cluster's
  // configuration nor dugong's defaults set it.
  std::string configured;
};

// The hot-standby settings `p`'s postgres runs (its /state's postgres.hotStandbyValues)
// at another value than `settings` (the cluster's configuration) or, where it does not
// set them, `defaults` (pg::defaultSettings). A setting set by neither is compared with
// postgres' own default only for being above it. Empty when `p` reports no values.
std::vector<HotStandbyMismatch> hotStandbyMismatches(const PeerView& p,
                                                     const std::map<std::string, std::string>& settings,
                                                     const std::map<std::string, std::string>& defaults);

// "max_connections = 120 (configured: 90), max_wal_senders = 12 (configured: 10)".
std::string describeMismatches(const std::vector<HotStandbyMismatch>& mismatches);

// A standby's replay position (its /state's postgres.replayLsn), or nullopt.
std::optional<WalPosition> replayPosition(const PeerView& p);

}  // namespace dugong::adm
