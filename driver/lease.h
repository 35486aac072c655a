// The primary's lease (docs/design.md "The primary's lease"): how long after a round
// trip through the ZooKeeper leader, timed from when it was sent, the session surely has
// not expired on the leader, less the time postgres takes to stop acknowledging commits.
#pragma once

#include <cstdint>
#include <optional>

namespace dugong::driver {

struct LeaseTerms {
  // An upper bound of the ensemble's tickTime; 0: half the negotiated session timeout
  // (ZooKeeper's floor: a session timeout is at least 2 x tickTime, unless an operator
  // lowered minSessionTimeout).
  int64_t tickTimeMs = 0;
  // From the deadline to a postgres that acknowledges no commit: the postmaster's fast
  // shutdown after SIGINT, and the loop's scheduling slack.
  int64_t stopMarginMs = 300;
  // Writes stop (read-only, client sessions terminated) this long before the deadline.
  int64_t writeStopLeadMs = 200;
};

// The lease's end for a round trip sent at `sentAtMs` on a session of `sessionTimeoutMs`
// (negotiated) whose round trips are `intervalMs` apart: sentAt + T - (tickTime +
// interval) - T/100 - stopMargin. See docs/design.md for each term's worst case.
int64_t leaseDeadlineMs(int64_t sentAtMs, int64_t sessionTimeoutMs, int64_t intervalMs, const LeaseTerms& terms);
// How long the lease lasts after the send (the deadline's distance from sentAt); <= 0:
// the configuration leaves no lease at all.
int64_t leaseLengthMs(int64_t sessionTimeoutMs, int64_t intervalMs, const LeaseTerms& terms);

class Core;

// The driver's lease (driver/lease.cc, which alone changes it; the other protocols ask
// its queries): whether round trips are confirmed at all, the lease's end on its session,
// the last confirmed round trip, and whether the lease ended (writes stopped for it).
class Lease {
 public:
  bool inUse() const { return inUse_; }
  bool ended() const { return inUse_ && ended_; }
  std::optional<int64_t> deadline() const { return deadline_; }
  int64_t sentAt() const { return sentAt_; }        // of the last confirmed round trip
  int64_t sessionId() const { return sessionId_; }  // the session of deadline()
  int64_t intervalMs() const { return intervalMs_; }

 private:
  friend class Core;  // lease.cc
  bool inUse_ = false;
  std::optional<int64_t> deadline_;
  int64_t sentAt_ = 0;
  int64_t sessionId_ = 0;
  int64_t intervalMs_ = 0;
  bool ended_ = false;
};

}  // namespace dugong::driver
