// Physical replication slots: each standby streams through a slot named after it on its
// upstream, so that the upstream keeps the WAL the standby still needs (bounded by
// max_slot_wal_keep_size). The standby creates its slot over a replication connection
// (the replication role needs nothing beyond REPLICATION for that) before it streams,
// and drops it on its old upstream when it moves; a primary drops the inactive slots
// of peers that are not its sync.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::pg {

// The slot name for a peer id: "dugong_" + the id in [a-z0-9_], with a hash of the id
// appended when the mapping changed it (so that "a.b" and "a_b" differ). At most 63.
std::string slotNameFor(const std::string& peerId);

// Whether a slot name is one dugong made.
bool isDugongSlot(const std::string& slotName);

// On the server of `replicationConninfo` (a physical replication connection): creates
// the slot reserving WAL from now, unless it exists and still holds WAL. A slot that
// lost its WAL (max_slot_wal_keep_size exceeded) is dropped and created again, and the
// result says so (`recreated`): the standby may then need a rebuild.
struct SlotEnsured {
  bool created = false;
  bool recreated = false;
};
Result<SlotEnsured> ensureSlot(const std::string& replicationConninfo, const std::string& slotName,
                               std::chrono::milliseconds timeout);

// Drops the slot on the server of `replicationConninfo`; a missing slot is no error.
Result<bool> dropSlot(const std::string& replicationConninfo, const std::string& slotName,
                      std::chrono::milliseconds timeout);

}  // namespace dugong::pg
