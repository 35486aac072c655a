// Compound faults that aim at a takeover's races, each aimed at the current primary and
// its sync: restart-primary-late-sync, cut-sync-crash-primary (with its cut at the
// write, armed for the primary's next new generation), flap-sync and restore-stale-sync.
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// The primary dies and comes back on a new session a little after its old one expired,
// while its sync, stalled, learns of that expiry only later: a takeover can then be
// decided on news older than the primary's return.
void World::restartPrimaryLateSync(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync"); });
  }
  trace('F', [&] { return f.describe() + ": " + state_->primary.id + " dies, " + state_->sync->id + " hears late"; });
  simworld::ZkClient& c = zk_.client(sync);
  c.slowNotifyUntil = now_ + sc_.sessionTimeoutMs + f.duration + 4000;
  c.slowNotifyMs = f.duration + 300 + static_cast<int64_t>(f.variant % 1500);
  crashPeer(primary, sc_.sessionTimeoutMs + f.duration);
}

// The primary replaces a sync cut off from ZooKeeper whose postgres still streams (and
// so acknowledges the primary's commits), and its postgres dies right after that fence
// while its own connection drops: the write of the new generation lands or not, and is
// answered "connection loss" either way.
void World::cutSyncCrashPrimary(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up || zk_.client(sync).partitioned) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync in reach"); });
  }
  // Or the primary's postgres runs on, and the primary is cut off as ZooKeeper applies
  // the write that replaces the sync, until after its agent has noticed (2/3 of the
  // session timeout) and shut postgres down (a sixth more), but back on the same
  // session: a write of unknown outcome that landed, whose fence must outlive the
  // resumption of writes.
  const bool runsOn = (f.variant >> 32) % 2 == 1;
  trace('F', [&] {
    return f.describe() + ": " + state_->sync->id + " cut off, " + state_->primary.id + " armed" +
           (runsOn ? " (cut off at its write; its postgres runs on)" : "");
  });
  // The old sync stays cut off (its postgres streaming) until well after the primary is
  // back.
  int64_t syncCut = f.duration;
  if (runsOn) {
    const int64_t t = sc_.sessionTimeoutMs;
    const int64_t spread = std::max<int64_t>(1, t / 6 - 300);
    cutAfterWrite_.push_back({primary, 5 * t / 6 + 50 + static_cast<int64_t>(f.variant / 200) % spread});
    syncCut = std::max<int64_t>(syncCut, 2 * t + 6000);
  } else {
    crashPgAfterFence_.push_back({static_cast<int64_t>(f.variant % 100), 100 + static_cast<int64_t>(f.variant / 100) % 3000,
                                  200 + static_cast<int64_t>(f.variant / 200) % 3000, primary});
  }
  zk_.partition(sync, syncCut);
}

// The primary dies while sending a record its sync has only the first bytes of, the
// sync's replay lagging behind what it received: its takeover must take initWal from
// where replay ends under the fence, the end of its last whole record, where its
// promotion begins the new timeline (pg/plan/fence.h planStandbyWalEnd); a replay that
// has not ended by promoteTimeout fails the read, and the step is tried again.
void World::partialRecordTakeover(const Fault& f) {
  const auto [primary, sync] = primaryAndSync();
  if (primary < 0 || sync < 0 || !node(primary).up || !node(sync).pg.serving()) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a running sync"); });
  }
  PgServer& s = node(sync).pg;
  s.partialBytes = 1 + f.variant % (Wal::kRecordBytes - 1);
  s.replayedAt = now_ + f.duration;
  s.stalledUntil = std::max(s.stalledUntil, now_ + sc_.sessionTimeoutMs + 2000);
  trace('F', [&] {
    return f.describe() + ": " + state_->primary.id + " dies, " + state_->sync->id + " holds " +
           std::to_string(s.partialBytes) + " bytes of a record past its WAL's " + std::to_string(s.wal.size()) +
           " records";
  });
  crashPeer(primary, sc_.sessionTimeoutMs + 1000);
}

// The sync goes (its session expired: in reality a pause of its agent), comes back, and
// goes again while the primary's slow postgres carries out what the sync's return asked
// for: its postgres streams on throughout, and acknowledges the primary's commits.
void World::flapSync(const Fault& f) {
  const auto roles = primaryAndSync();  // by name: clang 14 captures no structured binding
  const int primary = roles.first;
  const int sync = roles.second;
  if (primary < 0 || sync < 0 || !node(primary).up || zk_.client(sync).session == 0) {
    return trace('F', [&] { return std::string(f.describe() + ": no running primary with a sync in session"); });
  }
  trace('F', [&] { return f.describe() + ": " + state_->sync->id + " goes, " + state_->primary.id + "'s postgres slow"; });
  node(primary).pg.slowUntil = now_ + f.duration + 3000;
  auto expireSync = [this, sync] {
    if (zk_.client(sync).session == 0) return;
    node(sync).faultExpiredAt = now_;
    zk_.expire(zk_.client(sync).session, "expired by the fault scheduler");
  };
  expireSync();
  after(f.duration, expireSync);
}

// The cut of cut-sync-crash-primary's variant that lets the primary's postgres run on:
// armed for that primary, triggered as ZooKeeper applies its next new generation.
void World::cutAfterWrite(const std::string& writer) {
  const int n = nodeOf(writer);
  auto armed =
      std::find_if(cutAfterWrite_.begin(), cutAfterWrite_.end(), [n](const CutAfterWrite& c) { return c.node == n; });
  if (armed == cutAfterWrite_.end()) return;
  const int64_t cutFor = armed->cutFor;
  cutAfterWrite_.erase(armed);
  after(0, [this, n, cutFor] {
    trace('F', [&] { return std::string(node(n).identity.id + " is cut off as ZooKeeper applies its write"); });
    zk_.partition(n, cutFor);
  });
}

// The sync's data directory is restored, while its host is down, from a copy of another
// history: the primary's WAL up to a point before the generation's initWal, then records
// of a timeline of its own that run past initWal (no client was told of them). The
// primary's host dies at the same moment, so that the sync comes back as the sync of a
// cluster with no primary: its takeover must see that its WAL, however far it runs, is
// not the generation's history (its position alone would pass).
void World::restoreStaleSync(const Fault& f) {
  // A standby seed's peers hold the source's history: a copy of another one is a history
  // the source never had, which standby-ahead-of-source-sync flags by construction.
  if (source_) return trace('F', [&] { return f.describe() + ": skipped in a standby cluster"; });
  const auto roles = primaryAndSync();  // by name: clang 14 captures no structured binding
  const int primary = roles.first;
  const int sync = roles.second;
  if (primary < 0 || sync < 0 || !node(primary).up || !node(sync).up) {
    return trace('F', [&] { return f.describe() + ": skipped, no primary and sync up"; });
  }
  // Not in quorum mode yet: a restored first member feeds the async chain another
  // history, and a later takeover may make such an async a member, whose kept fence then
  // leaves it withdrawn (seed 280, docs/decisions/0079-quorum-commit.md "Phase 5 as
  // built", left).
  if (sc_.quorumK > 0) return trace('F', [&] { return f.describe() + ": skipped in quorum mode"; });
  const Wal& primaryWal = fleet_.server(primary).wal;
  const size_t initRecords = static_cast<size_t>(state_->initWal.value() / primaryWal.recordBytes());
  if (initRecords == 0 || primaryWal.size() < initRecords) {
    return trace('F', [&] { return f.describe() + ": skipped, no WAL before the generation's initWal"; });
  }
  // One in three: the primary's host instead, back well within the session timeout, so
  // that its agent starts postgres as the primary on that copy (pg/plan/transition.cc
  // refuses data off the generation's history; a takeover follows).
  const bool onPrimary = (f.variant >> 40) % 3 == 0;
  const int target = onPrimary ? primary : sync;
  Wal stale = primaryWal;
  stale.truncate(f.variant % initRecords);
  stale.promote(fleet_.newTimeline());
  const size_t extra = initRecords - stale.size() + 1 + (f.variant >> 20) % 8;
  for (size_t i = 0; i < extra; ++i) stale.append(kNeverAcknowledged + ++staleRecords_);
  trace('F', [&] {
    return f.describe() + ": " + node(target).identity.id + "'s host goes down and is restored from a copy of timeline " +
           std::to_string(stale.timeline()) + " (forked after " + std::to_string(f.variant % initRecords) +
           " records, " + std::to_string(stale.size()) + " in all; initWal at " + std::to_string(initRecords) + ")" +
           (onPrimary ? "" : "; " + node(primary).identity.id + "'s host dies");
  });
  const int64_t downFor = onPrimary ? 100 + static_cast<int64_t>(f.variant % 1000) : f.duration;
  crashPeer(target, downFor);
  PgServer& restored = fleet_.server(target);
  restored.wal = std::move(stale);
  restored.setUp = true;
  node(target).restoredFromStaleCopy = true;
  if (!onPrimary) crashPeer(primary, f.duration + 2 * sc_.sessionTimeoutMs);
}

}  // namespace dugong::clustersim::world_internal
