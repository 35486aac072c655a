// Faults of a peer's postgres alone (its agent lives on): crash-postgres,
// slow-postgres, stall-replication, and crash-pg-after-fence (armed, triggered by the
// next fence).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// One that outlasts the withdrawal bound hits the primary: its withdrawal is what it
// exercises (the sync takes over while that postgres cannot run).
void World::crashPostgres(const Fault& f) {
  const int primary = primaryAndSync().first;
  const int n = f.duration >= kWithdrawAfterMs && primary >= 0 ? primary : f.peer;
  if (!node(n).up) return trace('F', [&] { return std::string(f.describe() + ": agent down"); });
  fleet_.crash(n, f.duration);
}

// As crash-postgres: one that outlasts the withdrawal bound hits the primary, which must
// not leave ZooKeeper with its postgres still serving.
void World::unhealthyServing(const Fault& f) {
  const int primary = primaryAndSync().first;
  const int n = f.duration >= kWithdrawAfterMs && primary >= 0 ? primary : f.peer;
  trace('F', [&] { return f.describe() + ": " + node(n).identity.id + "'s postgres refuses new connections"; });
  fleet_.server(n).refusesNewConnectionsUntil = now_ + f.duration;
}

void World::slowPostgres(const Fault& f) {
  trace('F', [&] { return std::string(f.describe()); });
  node(f.peer).pg.slowUntil = now_ + f.duration;
}

void World::stallReplication(const Fault& f) {
  trace('F', [&] { return std::string(f.describe()); });
  node(f.peer).pg.stalledUntil = now_ + f.duration;
}

void World::armCrashPgAfterFence(const Fault& f) {
  trace('F', [&] { return std::string(f.describe() + ": armed"); });
  crashPgAfterFence_.push_back({static_cast<int64_t>(f.variant % 100), f.duration,
                                (f.variant / 100) % 2 ? 200 + static_cast<int64_t>(f.variant / 200) % 3000 : 0});
}

// A postgres crash in the middle of a takeover, between its fence and its state write
// (or just after), as an armed crash-pg-after-fence fault says: the agent lives on, and
// its health logic must not undo the fence by restarting postgres as it was before.
void World::crashPgAfterFence(int n) {
  auto armed = std::find_if(crashPgAfterFence_.begin(), crashPgAfterFence_.end(),
                            [n](const CrashAfterFence& c) { return c.onlyNode < 0 || c.onlyNode == n; });
  if (armed == crashPgAfterFence_.end()) return;
  const CrashAfterFence crash = *armed;
  crashPgAfterFence_.erase(armed);
  uint64_t inc = node(n).incarnation;
  after(crash.delay, [this, n, inc, crash] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return std::string(node(n).identity.id + "'s postgres dies right after its fence"); });
    fleet_.crash(n, crash.brokenFor);
    // Its connection to ZooKeeper may drop at the same moment: a state write in flight
    // then lands or not, and is answered "connection loss" either way.
    if (crash.cutFor > 0) zk_.partition(n, crash.cutFor);
  });
}

}  // namespace dugong::clustersim::world_internal
