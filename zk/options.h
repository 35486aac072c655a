// How a peer reaches ZooKeeper and where its cluster lives there.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "statemachine/result.h"

namespace spdlog {
class logger;
}

namespace dugong::zk {

// Digest authentication ("digest" scheme, "user:password"). When set, every node the
// adapter creates gets the ACL {ALL for this identity, READ for world:anyone}, so only
// clients that authenticate with the same identity (agents and operators) can write.
struct DigestAuth {
  std::string user;
  std::string password;
  std::string credentials() const { return user + ":" + password; }
};

// A session id and password: enough for another handle (or a restarted agent) to
// re-attach to the session while it has not expired.
struct SessionCredentials {
  int64_t sessionId = 0;
  std::string password;  // ZooKeeper's 16 bytes
};

struct ZkOptions {
  // "host:port[,host:port...]". Required.
  std::string connectString;
  // Optional chroot ("/prod"); appended to the connect string. Must start with '/'.
  std::string chroot;
  // Cluster name; the root defaults to "/dugong/<cluster>". Required unless root is set.
  std::string cluster;
  // Absolute path of the cluster's root node. Default: "/dugong/<cluster>".
  std::string root;
  // Requested session timeout. The server clamps it to [2, 20] x its tickTime.
  // Default 10 s.
  int sessionTimeoutMs = 10000;
  // Back-off between attempts to open a new session (after expiry or a failed
  // setup): the n-th delay is uniform in [d/2, d] with d = min(max, initial * 2^n).
  int backoffInitialMs = 100;
  int backoffMaxMs = 5000;
  // How long a write whose outcome was lost with the connection waits for a
  // reconnection to resolve it by re-reading the state. After this, it is reported
  // failed ("outcome unknown"); that is safe because every write is a test-and-set.
  // Default 0: the session timeout.
  int unknownOutcomeTimeoutMs = 0;
  // How often a session with a lease callback (Session::setLeaseCallback) sends a round
  // trip through the ZooKeeper leader (a `sync`). 0: a tenth of the negotiated session
  // timeout, within [50, 1000] ms.
  int leaseIntervalMs = 0;
  // false: no lease round trips at all (a primary then relies on the connection's loss
  // alone, which a follower cut off from its leader hides; for comparisons).
  bool lease = true;
  // Off by default.
  std::optional<DigestAuth> auth;
  // The first handle re-attaches to this session (a restarted agent keeps its session
  // and its election node); when the server says it has expired, a new one is opened.
  std::optional<SessionCredentials> resume;
  // Where the adapter logs; default: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;

  std::string effectiveRoot() const { return root.empty() ? "/dugong/" + cluster : root; }
  std::string hosts() const { return connectString + chroot; }
  // The lease round trips' interval for a negotiated session timeout.
  int leaseIntervalFor(int negotiatedTimeoutMs) const;
  // Checks the options once, with precise messages.
  Result<bool> validate() const;
};

}  // namespace dugong::zk
