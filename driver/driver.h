// The driver: the agent's logic around the state machine, on an environment
// (driver/env.h). The daemon, dugong-sim and dugong-cluster-sim all run this code.
//
// The logic is the pure core (driver/core.h); this is its runner, the one place where
// it meets the world: it turns the environment's callbacks, completions and timers into
// the core's inputs, carries out the commands the core returns, in order, owns every
// timer and the one lifetime guard. An answer that arrives while commands are being
// carried out (an environment that answers inside the call) is stepped once they are all
// carried out, so that the core always sees one input at a time.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "driver/core.h"
#include "driver/env.h"

namespace dugong::driver {

class Runner {
 public:
  Runner(Env env, DriverOptions options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Looks at postgres, starts its health check and joins the coordinator. False (and
  // a fatal error) if the coordinator refuses to join.
  bool start();
  // Leaves the coordinator, stops the health check and every timer, stops postgres if
  // configured to, then calls `done` (later, on the loop). Nothing is stepped after.
  void stop(std::function<void()> done);

  // Runs once, later on the loop, after a fatal error (the caller then stops).
  void onFatal(std::function<void()> cb) { onFatal_ = std::move(cb); }
  bool failed() const { return core_.failed(); }

  const Peer& peer() const { return core_.peer(); }
  bool healthy() const { return core_.healthy(); }
  const std::string& unhealthyDetail() const { return core_.unhealthyDetail(); }
  // Why the last automatic rejoin of this deposed peer failed (empty: none failed since
  // one worked).
  const std::string& lastRejoinError() const { return core_.lastRejoinError(); }
  bool withdrawn() const { return core_.withdrawn(); }
  bool stopping() const { return core_.stopping(); }
  // A postgres transition (apply or fence) is in flight.
  bool pgBusy() const { return core_.pgBusy(); }
  bool applyQueued() const { return core_.applyQueued(); }
  // Postgres runs the configuration the state machine wants (see Core).
  bool runsWantedConfig() const { return core_.runsWantedConfig(); }
  const DriverCounters& counters() const { return core_.counters(); }
  // Writes are stopped, or being stopped, because the coordinator's connection was lost
  // (and not yet resumed nor overridden by a new configuration). Such a peer must not
  // advertise itself as a writable primary.
  bool writesStopped() const { return core_.writesStopped(); }
  // The role whose postgres transition last finished (the state machine's role may be ahead).
  Role appliedRole() const { return core_.appliedRole(); }
  // Postgres was shut down because the session may have expired (see writesStopped()).
  bool postgresShutDown() const { return core_.postgresShutDown(); }
  bool coordinatorConnected() const { return core_.coordinatorConnected(); }
  // The lease's end (monotonic ms), once a leader round trip confirmed the session.
  std::optional<int64_t> leaseDeadline() const { return core_.leaseDeadline(); }
  // The failsafe: the end of the permission this primary holds from its sync, and the
  // end of the promise this peer gave (monotonic ms; nullopt: none).
  std::optional<int64_t> failsafeUntil() const { return core_.failsafeUntil(); }
  std::optional<int64_t> promisedUntil() const { return core_.promisedUntil(); }
  // A primary's request for a failsafe promise (POST /failsafe), decided at once.
  FailsafeAnswer onFailsafeRequest(const FailsafeRequest& request);

  // The agent's process is stopped (SIGSTOP, a stopped process group) and later
  // continues: while paused every input waits, in order, and resume() steps them with
  // the time they are stepped at, as a process that continues reads its clock. The
  // simulators' model of a stopped agent (whose watchdog, in a session of its own, acts
  // meanwhile); the daemon never pauses.
  void pause() { paused_ = true; }
  void resume();
  bool paused() const { return paused_; }

 private:
  // Steps the core with `input` now (or, while commands are being carried out, once
  // they are) and carries out what it returns.
  void feed(Input input);
  void carryOut(Command command);
  // A callback that feeds its answer as an input, unless the driver is gone or stopping.
  template <class T, class MakeInput>
  std::function<void(T)> answer(MakeInput make, bool posted = false);

  Env env_;
  DriverOptions opts_;
  Core core_;
  std::map<TimerKey, std::unique_ptr<Timer>> timers_;
  std::deque<Input> pending_;
  std::vector<Command> spareCommands_;  // feed's buffer of commands, between feeds
  bool carryingOut_ = false;
  bool paused_ = false;
  std::function<void()> onFatal_;
  std::function<void()> stopped_;  // Runner::stop's `done`
  std::optional<FailsafeAnswer> answered_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace dugong::driver
