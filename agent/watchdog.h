// The watchdog: a process of its own, forked when the agent starts, that stops this
// peer's postgres when the agent stops running while it is a primary.
//
// An agent that is frozen (SIGSTOP, a hung host process) cannot stop writes when its
// ZooKeeper session is about to expire: the session expires, the sync takes over, and the
// old primary's postgres still acknowledges commits that wait for no standby
// (synchronous_commit = local). That is a second writer. The agent beats (every quarter
// of `limit`, from its event loop) and arms the watchdog while it runs as a primary; a
// beat older than `limit` (half the session timeout: the session cannot expire, and no
// other peer take over, before two thirds of it) makes the watchdog ask the postmaster
// for a fast shutdown, which ends every session at once. A frozen process beats no more,
// so the watchdog must live outside it: a forked child, sharing one page with it, that
// ends with it (PR_SET_PDEATHSIG).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

class Watchdog {
 public:
  // Forks the watchdog process. Call before any thread is started, after the logger is
  // set up (the watchdog logs through it).
  static Result<std::unique_ptr<Watchdog>> start(const std::string& dataDir, std::chrono::milliseconds limit);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The agent runs: called from its event loop every `beatInterval()`.
  void beat(bool primary);
  // Disarmed for good (a stopping agent).
  void disarm();
  std::chrono::milliseconds beatInterval() const { return limit_ / 4; }

 private:
  struct Shared;
  Watchdog(Shared* shared, int pid, std::chrono::milliseconds limit) : shared_(shared), pid_(pid), limit_(limit) {}
  Shared* shared_;
  int pid_;
  std::chrono::milliseconds limit_;
};

}  // namespace dugong::agent
