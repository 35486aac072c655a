// The writes planner: when stopping writes (the agent lost ZooKeeper), shutting a primary
// down, and resuming writes have something to do. Pure: pg/controller_writes.cc and the
// simulated postgres (sim/world/sim_postgres.cc) both run it.
#pragma once

namespace dugong::pg {

struct WritesFacts {
  bool running = false;        // a live postmaster
  bool primary = false;        // its managed configuration is a primary's
  bool writesStopped = false;  // its configuration is marked writes-stopped
};

// Whether writes must be stopped: only a primary accepts writes; a stopped one only
// matters when it may be started again (`evenIfDown`: the shutdown, which marks its
// configuration so that any start is read-only).
bool mustStopWrites(const WritesFacts& facts, bool evenIfDown);

// Whether the shutdown stops postgres: the signal was sent, or there is a primary to stop.
bool shutDownStops(bool signalled, bool primaryMarked);

// Whether resuming has anything to lift.
bool mustResumeWrites(const WritesFacts& facts);

}  // namespace dugong::pg
