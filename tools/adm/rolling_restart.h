// The checks between the steps of `dugong-adm restart --rolling` and `--pending`
// (tools/adm/commands_restart.cc) and what it says when a bound passes. Pure: they look
// at cluster states and positions only.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "statemachine/cluster_state.h"
#include "statemachine/wal_position.h"

namespace dugong::adm {

// Why `id` may not be restarted now as the `role` ("primary", "sync", "async") it held
// when the rolling restart was planned on `planned`: the state `now` gives it another
// role (a sync that became an async or the reverse is still a standby), or names another
// primary (a takeover, or a switchover by someone else, between two steps). Nullopt when
// both still hold. A restart decided for a standby would
// otherwise restart a peer that became primary in place: a write gap, and a wait for it
// to stream that never ends.
std::optional<std::string> roleChangedSince(const ClusterState& planned, const ClusterState& now,
                                            const std::string& id, const std::string& role);

// What the rolling restart says when standby `id` (`role`) has not replayed the
// primary's WAL up to `target` within `bound` (`restart --wait`): it stops there, with
// `at` the standby's replay position last seen (nullopt: unknown).
std::string replayBoundPassed(const std::string& id, const std::string& role, WalPosition target,
                              std::optional<WalPosition> at, std::chrono::seconds bound);

}  // namespace dugong::adm
