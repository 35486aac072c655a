// The driver's lease (driver/lease.h, docs/design.md "The primary's lease"): a
// primary's writes go on while a round trip through the ZooKeeper leader confirmed the
// session recently enough; at the lease's end they stop, and postgres is shut down,
// before the leader can expire the session and another peer take over, whatever the
// client library says about its connection (a follower cut off from its leader keeps
// answering pings.
#include "driver/lease.h"

#include <algorithm>

#include "driver/core.h"

namespace dugong::driver {

int64_t leaseLengthMs(int64_t sessionTimeoutMs, int64_t intervalMs, const LeaseTerms& terms) {
  const int64_t tick = terms.tickTimeMs > 0 ? terms.tickTimeMs : sessionTimeoutMs / 2;
  const int64_t clockRate = (sessionTimeoutMs + 99) / 100;
  return sessionTimeoutMs - tick - intervalMs - clockRate - terms.stopMarginMs;
}

int64_t leaseDeadlineMs(int64_t sentAtMs, int64_t sessionTimeoutMs, int64_t intervalMs, const LeaseTerms& terms) {
  return sentAtMs + leaseLengthMs(sessionTimeoutMs, intervalMs, terms);
}

bool Core::leaseValid() const {
  return lease_.deadline_ && now() < *lease_.deadline_ - opts_.lease.writeStopLeadMs;
}

void Core::onLease(const CoordinatorLease& l) {
  const int64_t length = leaseLengthMs(l.sessionTimeoutMs, l.intervalMs, opts_.lease);
  if (!lease_.inUse_) {
    lease_.inUse_ = true;
    const int64_t tick = opts_.lease.tickTimeMs > 0 ? opts_.lease.tickTimeMs : l.sessionTimeoutMs / 2;
    log(length > opts_.lease.writeStopLeadMs ? LogLevel::kInfo : LogLevel::kError,
        "lease: a primary writes for " + std::to_string(length) + " ms after each round trip through the ZooKeeper " +
            "leader (session timeout " + std::to_string(l.sessionTimeoutMs) + " ms, less tickTime " +
            std::to_string(tick) + (opts_.lease.tickTimeMs > 0 ? "" : " (assumed: half the session timeout)") +
            ", the round trips' interval " + std::to_string(l.intervalMs) + ", 1 % for clock rates and " +
            std::to_string(opts_.lease.stopMarginMs) + " ms to stop)" +
            (length > opts_.lease.writeStopLeadMs ? ""
                                                  : ": NO LEASE LEFT, a primary cannot write; raise the session "
                                                    "timeout or state the ensemble's tickTime (zookeeper.tickTimeMs)"));
  }
  const int64_t deadline = l.sentAtMs + length;
  // A new session's lease replaces the old one's (the old session expired: a lease on it
  // can say nothing about the new one, nor the other way round).
  const bool sameSession = l.sessionId == lease_.sessionId_;
  if (!sameSession) {
    // Writes that went on under the failsafe past the old lease stop: that session may
    // have expired and a takeover be decided; the new one's confirmation decides.
    if (failsafeInUse() && !isolation_.connectionLost()) {
      isolate("failsafe: a new ZooKeeper session while writing under the sync's promise: the old session may have "
              "expired, and a takeover be decided; stopping writes until the state is confirmed on the new one");
    }
    failsafe_.forgetPermission();
    cancelTimer(TimerKind::kFailsafe);
    lease_.sessionId_ = l.sessionId;
    lease_.deadline_.reset();
  }
  if (lease_.deadline_ && deadline <= *lease_.deadline_) return;
  const bool onFailsafe = failsafeInUse();
  lease_.deadline_ = deadline;
  lease_.sentAt_ = l.sentAtMs;
  lease_.intervalMs_ = l.intervalMs;
  coord_.sessionTimeoutMs = l.sessionTimeoutMs;
  armWriteDeadline();
  if (onFailsafe && leaseValid()) {
    log(LogLevel::kInfo, "failsafe: a round trip through the ZooKeeper leader confirmed the session again: writes go "
                         "on under the lease");
  }
  // The sync is asked for a promise once the next round trip is late (and early enough
  // for an answer before writes stop).
  if (peer_->role() == Role::kPrimary) {
    scheduleFailsafeAsk(l.sentAtMs + std::max(std::min(l.intervalMs * 3 / 2, length - opts_.lease.writeStopLeadMs - 100),
                                              l.intervalMs + l.intervalMs / 4));
  }
  cancelTimer(TimerKind::kLeaseShut);
  if (lease_.ended_ && !leaseValid()) return;  // a round trip answered too late to lift anything
  if (lease_.ended_) {
    lease_.ended_ = false;
    // Only on the session the lease ended on: a new session resumes through its
    // confirmation (afterNewSession), never by the same-session rule.
    if (isolation_.connectionLost() && coord_.connected && sameSession) {
      log(LogLevel::kInfo, "lease: a round trip through the ZooKeeper leader confirmed session " +
                               std::to_string(l.sessionId) + " again");
      reconnected("a round trip through the ZooKeeper leader confirmed the same session");
      return;
    }
  }
  reconcileWrites();
}

// A little before the lease's end: a primary stops writes now, and shuts postgres down
// at the end.
void Core::leaseEnding() {
  if (leaseValid() || failsafeHolds()) return;
  const bool primary =
      peer_->role() == Role::kPrimary || (isolation_.connectionLost() && isolation_.roleAtLoss() == Role::kPrimary);
  if (!primary) {
    // A peer that becomes the primary without a lease (its takeover write answered, its
    // new session confirmed, after the lease ended) is caught by the next look.
    setTimer(TimerKind::kLease, std::max<int64_t>(coord_.sessionTimeoutMs / 10, 50));
    return;
  }
  if (!lease_.deadline_) return;
  lease_.ended_ = true;
  const int64_t now = this->now();
  const int64_t left = std::max<int64_t>(writeDeadline() - now, 0);
  if (!isolation_.connectionLost()) {
    isolate("no round trip through the ZooKeeper leader has confirmed the session for " +
            std::to_string(now - lease_.sentAt_) + " ms (the connection itself " +
            (coord_.connected ? "looks up" : "is lost") + "): the " +
            (failsafe_.permittedUntil() ? "failsafe's permission" : "lease") + " ends in " + std::to_string(left) +
            " ms, stopping writes now");
  }
  cancelTimer(TimerKind::kFailsafe);
  if (postgresStillShutDown()) return;
  setTimer(TimerKind::kLeaseShut, left);
}

void Core::onLeaseShutTimer() {
  if (!lease_.ended_ || !isolation_.writesStopped()) return;
  shutDownWrites("the lease ended: the ZooKeeper leader may expire the session soon (no round trip through it "
                 "confirmed the session in time)");
}

}  // namespace dugong::driver
