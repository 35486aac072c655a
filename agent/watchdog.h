// The watchdog: a process of its own, forked when the agent starts, that stops this
// peer's postgres when the agent is stopped (SIGSTOP, a debugger) or dies (kill -9, out
// of memory) while it is a primary, and ends an agent whose loop hangs while the
// process runs.
//
// A stopped agent cannot stop writes when its ZooKeeper session is about to expire: the
// session expires, the sync takes over, and the old primary's postgres still
// acknowledges commits that wait for no standby (synchronous_commit = local). That is a
// second writer. The agent tells the watchdog whether it is the primary (on each applied
// role); the watchdog looks at the agent's state in /proc every half `limit`, and once
// the agent has been stopped for `limit` (half the session timeout: the session
// cannot expire, and no other peer take over, before two thirds of it) it asks the
// postmaster for a fast shutdown, which ends every session at once. A stopped process
// does nothing, so the watchdog lives outside it: a forked child, sharing one page with
// it. A dead agent is treated as a stopped one: the watchdog outlives it while armed,
// acts once `limit` after the death, and then ends; it ends with an agent that dies
// unarmed. An agent that stops cleanly while postgres runs on leaves it armed too
// (leaveArmed): a stopped agent's session expires as a dead one's does, and a primary's
// postgres left writable after the sync's takeover is a second writer. The agent's next
// run ends that watchdog once it has applied a role (agent/process_stamp.h names it in
// `<zookeeper.sessionFile>.watchdog`), so a restart quicker than `limit` costs nothing;
// a slower one costs a postgres restart, never a second writer.
//
// A hung loop (a log line blocked on a pipe nobody reads, a hung disk, a deadlock) keeps
// the session, since the ZooKeeper client's own threads answer the pings, and does
// nothing: nobody restarts a crashed primary's postgres, and nobody may take over. So the
// loop beats: a store into the page from the agent's status timer, which ticks anyway.
// A loop silent for `limit` while the process runs (not stopped) is hung: the watchdog
// shuts down a postgres that may acknowledge commits (this peer is the primary, or its
// postgres is not a standby), kills the agent, whose session then expires, and removes
// the session the agent kept for a restart, so that its next run (systemd starts it
// again) does not hold that session again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

// The watchdog's process name (its comm; at most 15 characters).
inline constexpr const char* kWatchdogProcessName = "dugong-watchdog";

class Watchdog {
 public:
  // Forks the watchdog process. Call before any thread is started, after the logger is
  // set up (the watchdog logs through it).
  // `sessionFile`: where the agent keeps its ZooKeeper session for a restart
  // (agent/session_file.h); removed when the watchdog ends a hung agent.
  static Result<std::unique_ptr<Watchdog>> start(const std::string& dataDir, std::chrono::milliseconds limit,
                                                 std::string sessionFile = "");
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Armed while this peer is the primary (called on each applied role).
  void setPrimary(bool primary);
  // The agent lost its ZooKeeper connection as the primary (true), or has it back
  // (false): it would itself shut postgres down a third of `limit` (a sixth of the
  // session timeout) after the loss, and if it stops or dies meanwhile, the watchdog
  // does so by then.
  void setConnectionLost(bool lost);
  // The primary's lease ends at `deadlineMs` (CLOCK_BOOTTIME, ms: the driver's clock,
  // agent/suspend_clock.h, which counts the host's suspends; driver/lease.h):
  // while armed, the watchdog asks the postmaster for a fast shutdown once that time has
  // passed without a newer deadline, whether the agent runs, is stopped or is gone (a hung
  // agent's ZooKeeper thread would keep the connection, not the lease).
  void setLeaseDeadline(int64_t deadlineMs);
  // The agent's loop runs: called from a periodic timer on the loop, at least every
  // `limit` / 4. From the first beat on, a loop silent for `limit` while the process
  // runs is hung.
  void beat();
  // The loop ends on purpose (the agent has stopped): its silence from now on is no hang.
  void endBeats();
  // Disarmed for good (an agent that stops postgres as it stops).
  void disarm();
  // The agent stops and postgres runs on: the watchdog stays as it is, outlives the
  // agent and acts as for a dead one, unless the next run ends it first.
  void leaveArmed() { leftArmed_ = true; }
  // The watchdog process.
  int pid() const { return pid_; }

  // The page shared with the watchdog process.
  struct Shared;

 private:
  Watchdog(Shared* shared, int pid) : shared_(shared), pid_(pid) {}
  Shared* shared_;
  int pid_;
  bool leftArmed_ = false;
};

// When the watchdog shuts postgres down for an agent it first saw stopped (or gone) at
// `seenStoppedMs`: `limit` after the stop began (it may have begun up to `pollMs` before
// it was seen), or a third of `limit` after a connection lost as primary at
// `connectionLostMs`, when the agent would have shut postgres down itself: whichever
// comes first. Times on one monotonic clock, in ms.
int64_t watchdogDeadlineMs(int64_t seenStoppedMs, int64_t pollMs, int64_t limitMs,
                           std::optional<int64_t> connectionLostMs);

}  // namespace dugong::agent
