// The driver's isolated primary (driver/isolated_primary.cc, which alone changes it; the
// other protocols ask its queries): the coordinator's connection lost and back, writes
// stopped, shut down and resumed, the confirmation on a new session, and the grace for
// the peers present before an outage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "statemachine/identity.h"
#include "statemachine/peer.h"

namespace dugong::driver {

class Core;

class Isolation {
 public:
  // What a decision about writes waits for.
  enum class WritesWait { kNothing, kLease, kTransition, kStep };

  bool connectionLost() const { return connectionLost_; }
  bool writesStopped() const { return writesStopped_; }
  bool postgresShutDown() const { return postgresShutDown_; }  // for a lost connection, a lease's end, a withdrawal
  // The role the peer had when the connection was lost.
  Role roleAtLoss() const { return roleAtLoss_; }
  // A resumption of writes waits for `wait` to end.
  bool resumptionWaitsFor(WritesWait wait) const { return resumeWanted_ && resumeWanted_->waitsFor == wait; }

 private:
  friend class Core;  // isolated_primary.cc
  bool connectionLost_ = false;
  bool primaryLossTold_ = false;  // PrimaryConnectionLoss{true} was the last told
  bool writesStopped_ = false;
  Role roleAtLoss_ = Role::kUnknown;
  std::optional<int64_t> generationAtLoss_;
  PeerList activeBeforeLoss_;
  // A loss was reported or found (activeBeforeLoss_ noted), and neither the same session
  // nor a new one has come since: a new session starts the grace.
  bool lossReported_ = false;
  std::optional<int64_t> peerGraceUntil_;
  bool postgresShutDown_ = false;
  bool shutDownInFlight_ = false;  // asked of the adapter, not answered yet
  // What the writes timer retries: stopping writes, resuming them (noTakeoverCanLand),
  // or the confirmation; and what the shutdown timer does: the shutdown half-way to the
  // earliest expiry after a loss (its delay), or again after a failure.
  enum class WritesRetry { kStop, kResume, kConfirm } writesRetry_ = WritesRetry::kStop;
  bool writesRetryNoTakeover_ = false;
  std::optional<int64_t> shutDownAfterLossMs_;
  // Writes to resume (how, noTakeoverCanLand), or the state to confirm on a new session,
  // once nothing in flight holds them back: a postgres transition, the state machine's
  // step or state write, the lease. Level-triggered: reconcileWrites() derives at the end
  // of each step whether what holds them back is over (resumeWaitsFor).
  struct Resumption {
    std::string how;
    bool noTakeoverCanLand = false;
    WritesWait waitsFor = WritesWait::kNothing;  // what it waited for when last looked at
  };
  std::optional<Resumption> resumeWanted_;
  bool confirmWanted_ = false;
  // Writes were stopped on a new session and have not resumed since: a connection that
  // comes back on it resumes them only through the confirmation, never by the
  // same-session rule.
  bool confirmOwed_ = false;
};

}  // namespace dugong::driver
