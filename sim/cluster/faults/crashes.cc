// Faults that kill a peer's agent, with or without its postgres: crash-peer,
// crash-agent (its watchdog outliving it) and crash-after-write (armed, triggered by
// the next new generation's write).
#include "sim/cluster/world_internal.h"

namespace dugong::clustersim::world_internal {

void World::crashPeer(const Fault& f) {
  if (!node(f.peer).up) return trace('F', [&] { return std::string(f.describe() + ": already down"); });
  crashPeer(f.peer, f.duration);
}

void World::crashAgent(const Fault& f) {
  if (!node(f.peer).up) return trace('F', [&] { return std::string(f.describe() + ": already down"); });
  // A suspended host runs nothing: its agent cannot die before it resumes.
  if (node(f.peer).suspended) return trace('F', [&] { return f.describe() + ": its host is suspended"; });
  // One in four restarts comes with the failsafe turned off in the agent's configuration
  // (or back on): what it promised before must hold all the same (review of 2f035ac,
  // finding 1).
  if (sc_.failsafe && f.variant % 4 == 1) {
    Node& nd = node(f.peer);
    nd.failsafeOff = !nd.failsafeOff;
    trace('F', [&] {
      return nd.identity.id + "'s agent restarts with the failsafe " + (nd.failsafeOff ? "off" : "on again");
    });
  }
  crashAgent(f.peer, f.duration);
}

void World::armCrashAfterWrite(const Fault& f) {
  trace('F', [&] { return std::string(f.describe() + ": armed"); });
  crashAfterWrite_.emplace_back(static_cast<int64_t>(f.variant % 200), f.duration);
}

void World::crashPeer(int n, int64_t downFor) {
  Node& nd = node(n);
  trace('F', [&] { return std::string(nd.identity.id + " crashes (agent and postgres); restarts in " + std::to_string(downFor) + " ms"); });
  fleet_.kill(n);
  stopAgent(n);
  nd.rebootedSincePromise = true;
  restartAgentAfter(n, downFor);
}

// The agent alone dies; its postgres runs on as it was (a primary stays writable, and
// acknowledges what its sync receives). Its ZooKeeper session expires unless the agent
// is back in time. The agent's watchdog (agent/watchdog.h) outlives it if armed (told
// primary: a primary's apply was announced, and no other role applied since) and asks postgres for a fast shutdown between a quarter and
// a half of the session timeout after the death, whatever runs there by then; or, if the
// agent had lost its connection as primary, by a sixth of the session timeout after the
// loss (when the agent would have), within a 24th (its poll then).
void World::crashAgent(int n, int64_t downFor) {
  const std::optional<int64_t> delay = watchdogDelay(n);
  trace('F', [&] {
    return std::string(node(n).identity.id + "'s agent dies, its postgres runs on; the agent restarts in " +
                       std::to_string(downFor) + " ms" + (delay ? "; its watchdog is armed" : ""));
  });
  stopAgent(n);
  restartAgentAfter(n, downFor);
  if (!delay) return;
  after(*delay, [this, n] {
    trace('F', [&] { return node(n).identity.id + "'s watchdog: its agent died as primary; fast shutdown of postgres"; });
    fleet_.kill(n);
  });
}

std::optional<int64_t> World::watchdogDelay(int n) {
  if (!node(n).watchdogPrimary) return std::nullopt;
  const int64_t lostAt = node(n).primaryConnectionLostAt;
  const int64_t leaseEnd = node(n).leaseDeadline;
  const int64_t t = sc_.sessionTimeoutMs;
  int64_t delay = rngAgent_.between(t / 4 + 1, t / 2);
  if (lostAt >= 0) delay = std::min(delay, std::max<int64_t>(0, lostAt + t / 6 - now_) + rngAgent_.between(0, t / 24));
  // At the lease's end (the watchdog sleeps until then, on the host's clock as the agent).
  if (leaseEnd >= 0) delay = std::min(delay, std::max<int64_t>(0, leaseEnd - hostClock(n)));
  return delay;
}

// The agent's process group is stopped: its loop steps nothing (the driver's inputs
// wait) and its ZooKeeper client, a thread of the same process, sends nothing, so the
// session expires after its timeout while postgres runs on. The watchdog, in a session
// of its own, sees its agent stopped and acts as for a dead one, if the agent is still
// stopped then. The agent then continues where it was, and hears everything late.
void World::stopAgentGroup(const Fault& f) {
  // Without a lease an agent that continues cannot tell that its session expired while
  // it was stopped before it hears so, and the health check's news may come first: the
  // lease (on by default) is what makes a stop survivable, as for a cut-off follower.
  if (!sc_.lease) return trace('F', [&] { return f.describe() + ": skipped, no leases"; });
  const int primary = primaryAndSync().first;
  const int n = (f.variant % 2 == 0 && primary >= 0) ? primary : f.peer;
  if (!node(n).up || node(n).driver->paused()) {
    return trace('F', [&] { return f.describe() + ": its agent is not running"; });
  }
  const std::optional<int64_t> delay = watchdogDelay(n);
  trace('F', [&] {
    return f.describe() + ": " + node(n).identity.id + "'s agent is stopped for " + std::to_string(f.duration) +
           " ms, its postgres runs on" + (delay ? "; its watchdog is armed" : "");
  });
  const uint64_t inc = node(n).incarnation;
  node(n).driver->pause();
  zk_.partition(n, f.duration);
  if (delay) {
    after(*delay, [this, n, inc] {
      if (!alive(n, inc) || !node(n).driver->paused()) return;
      trace('F', [&] { return node(n).identity.id + "'s watchdog: its agent is stopped as primary; fast shutdown of postgres"; });
      fleet_.kill(n);
    });
  }
  after(f.duration, [this, n, inc] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return node(n).identity.id + "'s agent continues"; });
    node(n).driver->resume();
  });
}

void World::restartAgentAfter(int n, int64_t downFor) {
  node(n).restartPending = true;
  after(downFor, [this, n] {
    if (!node(n).up && node(n).restartPending) startAgent(n);
  });
}

// A death right after a state write: the writer of a new generation dies before it has
// acted on it (or just after), as an armed crash-after-write fault says.
void World::crashAfterWrite(const std::string& writer) {
  int n = nodeOf(writer);
  if (n < 0 || crashAfterWrite_.empty()) return;
  const int64_t delay = crashAfterWrite_.front().first;
  const int64_t downFor = crashAfterWrite_.front().second;
  crashAfterWrite_.erase(crashAfterWrite_.begin());
  uint64_t inc = node(n).incarnation;
  after(delay, [this, n, inc, downFor] {
    if (!alive(n, inc)) return;
    trace('F', [&] { return std::string(node(n).identity.id + " dies right after its state write"); });
    crashPeer(n, downFor);
  });
}

}  // namespace dugong::clustersim::world_internal
