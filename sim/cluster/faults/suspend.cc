// A suspend of a peer's whole host (suspend-host): its agent, its postgres, its watchdog
// and its ZooKeeper client stand still for the span, while ZooKeeper, the other hosts and
// the clients go on in real time (decision 0070).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

// The host is suspended (a laptop's lid closed, a virtual machine suspended by its
// guest): the agent steps nothing (its inputs and its timers wait, in order), its
// ZooKeeper client sends nothing, so the session expires in real time, and its postgres
// commits, acknowledges, sends and receives nothing. Then the host resumes: its clock
// (CLOCK_BOOTTIME, World::hostClockAt) has counted the span, every timer the span passed is
// late, and the agent takes its first turn before postgres takes a commit again. Its
// network may come back a while after (interfaces, a DHCP lease): its ZooKeeper client
// then cannot learn yet that its session expired, and only its agent's clock tells it.
void World::suspendHost(const Fault& f) {
  const int primary = primaryAndSync().first;
  const int n = (f.variant % 3 != 0 && primary >= 0) ? primary : f.peer;
  Node& nd = node(n);
  // A stopped agent (stop-agent) continues on its own schedule: not on a suspended host.
  if (!nd.up || nd.driver->paused()) {
    return trace('F', [&] { return f.describe() + ": " + nd.identity.id + "'s agent is not running"; });
  }
  // A client cut off already heals on its own schedule, perhaps within the suspend.
  if (zk_.client(n).partitioned) {
    return trace('F', [&] { return f.describe() + ": " + nd.identity.id + " is cut off from ZooKeeper already"; });
  }
  const int64_t networkLate =
      (f.variant / 3) % 2 == 0 ? 0 : 200 + static_cast<int64_t>((f.variant >> 8) % static_cast<uint64_t>(2 * sc_.sessionTimeoutMs));
  trace('F', [&] {
    return f.describe() + ": " + nd.identity.id + "'s host is suspended for " + std::to_string(f.duration) +
           " ms (agent, postgres and watchdog)" +
           (networkLate > 0 ? "; its network comes back " + std::to_string(networkLate) + " ms after the resume" : "");
  });
  nd.suspended = true;
  ++suspendedHosts_;
  nd.suspends.emplace_back(now_, now_ + f.duration);
  nd.driver->pause();
  zk_.partition(n, f.duration + networkLate);
  const size_t which = nd.suspends.size();
  after(f.duration, [this, n, which] {
    if (node(n).suspends.size() == which) resumeHost(n);
  });
}

// The host resumes (at the end of its suspend, or as a fault stops its agent, or as the
// faults stop): its agent steps what waited, at the time it steps it, before postgres
// takes a commit (client.cc) or sends WAL again.
void World::resumeHost(int n) {
  Node& nd = node(n);
  if (!nd.suspended) return;
  nd.suspended = false;
  --suspendedHosts_;
  nd.suspends.back().second = now_;
  const int64_t from = nd.suspends.back().first;  // by name: clang 14 captures no structured binding
  trace('F', [&] {
    return nd.identity.id + "'s host resumes after " + std::to_string(now_ - from) + " ms; its clock reads " +
           std::to_string(hostClock(n)) + " (" + std::to_string(hostClockAt(n, from)) + " at the suspend)" +
           (nd.driver ? "; its agent steps what waited" : "");
  });
  if (nd.driver && nd.driver->paused()) nd.driver->resume();
}

std::vector<std::pair<PgServer*, int64_t>> World::holdSuspendedStreams() {
  std::vector<std::pair<PgServer*, int64_t>> held;
  for (Node& nd : nodes_) {
    PgServer& pg = nd.pg;
    const int upstream = pg.config.upstream ? nodeOf(pg.config.upstream->id) : -1;
    if (!nd.suspended && (upstream < 0 || !node(upstream).suspended)) continue;
    held.emplace_back(&pg, pg.stalledUntil);
    pg.stalledUntil = kForever;
  }
  return held;
}

}  // namespace dugong::clustersim::world_internal
