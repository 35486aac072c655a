// The values the environment (driver/env.h) reports to the driver's core and its runner:
// what the coordinator and postgres tell. The core (driver/core.h) knows these, not the
// interfaces that produce them.
#pragma once

#include <cstdint>
#include <string>

namespace dugong::driver {

// ---- the coordinator (ZooKeeper) ------------------------------------------------------

// The connection of an established, initialised session was lost or regained.
struct CoordinatorConnection {
  // false: lost; the session may still be valid, and another peer cannot take over
  // before it expires. ZooKeeper's C client reports the loss once the server has been
  // silent for about 2/3 of the session timeout, so the session can expire about 1/3
  // of the timeout after this report, at the earliest.
  // true: connected again to the SAME session (election node and watches intact).
  // A new session after an expiry is reported by ZkInitialized instead.
  bool connected = false;
  int64_t sessionId = 0;
  int64_t sessionTimeoutMs = 0;  // negotiated
};

// A round trip through the coordinator's leader answered on the current session
// (ZooKeeper: a `sync`), sent at `sentAtMs` on the Clock's monotonic clock: the
// session cannot expire before about sentAtMs + sessionTimeoutMs, less the margins of
// docs/design.md "The primary's lease" (driver/lease.h).
struct CoordinatorLease {
  int64_t sentAtMs = 0;
  int64_t sessionId = 0;
  int64_t sessionTimeoutMs = 0;  // negotiated
  int64_t intervalMs = 0;        // how often such round trips are sent
};

// ---- postgres -------------------------------------------------------------------------

// What the last look at postgres (the agent's status poll) saw of its WAL receiver.
struct StreamSample {
  bool running = false;       // postgres answers
  std::string streamingFrom;  // the peer its WAL receiver streams from now ("": none)
  bool operator==(const StreamSample&) const = default;
};

// The end of Postgres::rejoin.
struct RejoinFinished {
  bool ok = false;        // postgres runs as an async standby of the primary
  bool rewound = false;   // local WAL after the fork was discarded (policy kRewind only)
  std::string discarded;  // when rewound: the WAL range discarded, in plain words
  std::string error;      // when !ok: why (nothing was changed unless `rewound`)
};

}  // namespace dugong::driver
