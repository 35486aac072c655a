#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/replication_slots.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// ---------------------------------------------------------------- replication slots

Result<std::string> PgController::replicationConninfo(const PeerIdentity& peer) const {
  auto c = peerConninfo(peer, true);
  if (!c) return c;
  return c.value() + " " + buildConninfo({{"replication", "true"}});
}

std::optional<std::string> PgController::prepareSlot(const PeerIdentity& upstream, const ManagedState& previous) {
  const std::string slot = slotNameFor(options_.peerId);
  // Its slot on the upstream it leaves goes off the apply's path (pg/slot_drop_queue.h);
  // one queued on the upstream it returns to stays.
  slotDrops_.cancel(upstream.id);
  if (previous.slotName && previous.upstreamUrl && previous.upstreamId && *previous.upstreamId != upstream.id) {
    PeerIdentity old;
    old.id = *previous.upstreamId;
    old.pgUrl = *previous.upstreamUrl;
    if (auto c = replicationConninfo(old)) {
      slotDrops_.add(old.id, c.value(), *previous.slotName);
    } else {
      spdlog::warn("pg: cannot drop replication slot {} on the previous upstream {} ({}); its WAL is bounded by "
                   "max_slot_wal_keep_size and the slot is dropped when that peer next becomes primary",
                   *previous.slotName, old.id, c.error());
    }
  }
  auto c = replicationConninfo(upstream);
  if (!c) return std::nullopt;
  auto e = ensureSlot(c.value(), slot, options_.queryTimeout);
  if (!e) {
    spdlog::warn("pg: streaming from {} without a replication slot: {}", upstream.id, e.error());
    return std::nullopt;
  }
  if (e->recreated) {
    spdlog::warn("pg: replication slot {} on {} had lost its WAL (more than max_slot_wal_keep_size behind); "
                 "created it again: if this standby cannot stream, it must be rebuilt",
                 slot, upstream.id);
  } else if (e->created) {
    spdlog::info("pg: created replication slot {} on {}", slot, upstream.id);
  }
  return slot;
}

void PgController::dropStaleSlots(const std::optional<std::string>& keepFor) {
  auto q = localQuery("SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'physical' AND NOT active");
  if (!q) {
    spdlog::warn("pg: cannot list replication slots: {}", q.error());
    return;
  }
  const std::string keep = keepFor ? slotNameFor(*keepFor) : "";
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, std::chrono::steady_clock::time_point> stillInactive;
  for (const auto& row : q->rows) {
    std::string name = row[0].value_or("");
    if (!isDugongSlot(name) || name == keep) continue;
    auto seen = inactiveSlotsSince_.find(name);
    const auto since = seen == inactiveSlotsSince_.end() ? now : seen->second;
    if (now - since < options_.dropInactiveSlotAfter) {
      stillInactive[name] = since;
      continue;
    }
    auto d = localQuery("SELECT pg_drop_replication_slot(" + quoteLiteral(name) + ")");
    if (d) {
      spdlog::info("pg: dropped replication slot {}: that peer has not streamed from this primary for {} s", name,
                   std::chrono::duration_cast<std::chrono::seconds>(now - since).count());
    } else {
      spdlog::warn("pg: could not drop replication slot {}: {}", name, d.error());
    }
  }
  inactiveSlotsSince_ = std::move(stillInactive);
  std::lock_guard lock(stateMu_);
  lastSlotSweep_ = now;
}

void PgController::reserveWalForOldUpstream(const ManagedState& previous) {
  if (!previous.upstreamId || *previous.upstreamId == options_.peerId) return;
  const std::string slot = slotNameFor(*previous.upstreamId);
  const auto started = std::chrono::steady_clock::now();
  // Invalidated (it lost its WAL to max_slot_wal_keep_size): dropped and made anew.
  auto q = localQuery("SELECT CASE WHEN restart_lsn IS NULL THEN 'lost' ELSE restart_lsn::text END "
                      "FROM pg_replication_slots WHERE slot_name = " + quoteLiteral(slot));
  if (q && !q->rows.empty() && q->rows[0][0] != "lost") {
    spdlog::info("pg: replication slot {} already keeps this peer's WAL from {} for {}", slot,
                 q->rows[0][0].value_or("?"), *previous.upstreamId);
    return;
  }
  if (q && !q->rows.empty()) localQuery("SELECT pg_drop_replication_slot(" + quoteLiteral(slot) + ")");
  auto c = q ? localQuery("SELECT lsn::text FROM pg_create_physical_replication_slot(" + quoteLiteral(slot) +
                          ", true)")
             : q;
  if (!c || c->rows.empty()) {
    spdlog::warn("pg: could not reserve WAL for {}, the upstream this peer replaces ({}): if it comes back, it may "
                 "need a base backup",
                 *previous.upstreamId, c ? "no answer" : c.error());
    return;
  }
  spdlog::info("pg: reserved this peer's WAL from {} for {}, the upstream it replaces, in replication slot {} "
               "({} ms): it can rejoin by pg_rewind and stream through it; dropped if unused for {} s",
               c->rows[0][0].value_or("?"), *previous.upstreamId, slot,
               msSince(started),
               options_.dropInactiveSlotAfter.count());
}

void PgController::sweepInactiveSlots() {
  std::unique_lock applyLock(applyMu_, std::try_to_lock);
  if (!applyLock.owns_lock()) return;
  std::optional<std::string> sync;
  {
    std::lock_guard lock(stateMu_);
    if (state_.role != "primary" || pending_) return;
    sync = state_.syncId;
  }
  dropStaleSlots(sync);
}

// A slot its upstream dropped (a primary drops the inactive slots of the peers that are
// not its sync) refuses this standby for good: "replication slot ... does not exist" in
// its log. Created again, the WAL receiver's next attempt streams.
void PgController::recreateMissingSlot(const PeerIdentity& upstream, const std::string& slot,
                                       const std::string& logTail) {
  if (!lineWith(lastLines(logTail, 5), "replication slot \"" + slot + "\" does not exist")) return;
  auto c = replicationConninfo(upstream);
  auto e = c ? ensureSlot(c.value(), slot, options_.queryTimeout) : Result<SlotEnsured>(Error{c.error()});
  if (!e) {
    spdlog::warn("pg: the upstream {} has no replication slot {} for this standby, and creating it failed: {}",
                 upstream.id, slot, e.error());
  } else if (e->created || e->recreated) {
    spdlog::warn("pg: the upstream {} had dropped replication slot {}: created it again, so that this standby streams",
                 upstream.id, slot);
  }
}

}  // namespace dugong::pg
