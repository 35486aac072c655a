// The writes planner: when stopping writes (the agent lost ZooKeeper), shutting a primary
// down, and resuming writes have something to do, and what an apply of a primary leaves
// while writes are stopped. Pure: pg/controller_writes.cc and the simulated postgres
// (sim/world/sim_postgres.cc) both run it.
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

// How the shutdown of a primary's writes stops postgres. kImmediate (SIGQUIT): no session
// commits from the signal on, and no shutdown checkpoint removes the WAL segments that a
// rewind of this peer reads once it is deposed (decision 0058). kFast (SIGINT) would let
// the walsenders send the rest first, but its checkpoint removes them.
enum class WritesShutdown { kFast, kImmediate };
WritesShutdown writesShutdownMode();

// Whether resuming has anything to lift.
bool mustResumeWrites(const WritesFacts& facts);

// The adapter's writes mode: sticky from a stop (or a shutdown) of writes until the
// driver resumes them; no apply lifts it.
enum class WritesMode {
  kOpen,      // as each role's configuration says
  kStopped,   // a primary is read-only (its configuration marked writes-stopped)
  kShutDown,  // a primary is not running: an apply neither starts nor keeps one
};

WritesMode afterStopWrites(WritesMode mode);  // a shutdown stays a shutdown
WritesMode afterShutDown(WritesMode mode);
WritesMode afterResume(WritesMode mode);

// What an apply of role primary leaves under `mode`, whenever in the apply the mode
// is looked at (before and after each start, reload or promotion).
struct PrimaryUnderWrites {
  bool run = true;             // postgres runs (false: stopped, or not started)
  bool writesStopped = false;  // its configuration marked writes-stopped (read-only)
};
PrimaryUnderWrites planPrimaryUnderWrites(WritesMode mode);

const char* writesModeName(WritesMode mode);

}  // namespace dugong::pg
