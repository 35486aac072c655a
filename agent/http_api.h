// The agent's HTTP API: which endpoint answers what, as a pure function of a snapshot
// of this peer's status. The server (agent/http_server.h) carries requests in and
// replies out; the agent (agent/agent.h) takes the snapshot and carries out a
// switchover the API accepted.
//
//   GET /ping        200 while the agent runs
//   GET /liveness    200: answered on the agent's event loop, so a hung loop fails it
//   GET /health      200 while postgres accepts connections
//   GET /readiness   200 while this peer serves its role (writable primary, streaming standby)
//   GET /primary     200 on the writable primary
//   GET /replica     200 on a streaming sync or async            [lag, noloadbalance]
//   GET /read-only   200 on the writable primary or a /replica   [lag, noloadbalance]
//   GET /sync        200 on the streaming sync, in quorum mode on every streaming member
//                    of the set                                  [lag, noloadbalance]
//   GET /quorum      200 on the writable primary of a quorum-mode cluster: the set, k,
//                    the read quorum and each member's walsender and flush position
//                    (docs/decisions/0079-quorum-commit.md 6.5); 503 elsewhere
//   GET /async       200 on a streaming async                    [lag, noloadbalance]
//   GET /standby-leader (and /standby_leader, Patroni's spelling)   200 on a standby
//                    cluster's leader while it streams from its source (docs/decisions/
//                    0083-standby-cluster.md 9.1); it counts as a /replica too
//   GET /state, /metrics   the status document, Prometheus metrics
//   POST /switchover {"leader": PRIMARY, "candidate": ID} (either or both; no candidate:
//                    the sync)   needs the credential (see checkCredential)
//   POST /restart, POST /reload          the same; restarts or reloads this peer's postgres
//                                        (body: none or {}), answered once done
//   POST /failsafe   a primary asks its sync for a failsafe promise (driver/failsafe.h):
//                   the messages and their authentication by the cluster's peer key are
//                   agent/failsafe_message.h's; never the bearer token
//
// [lag]: ?lag=N (bytes, or a size such as 16MB or 1GB) answers 503 when the standby's
// replay is more than N bytes behind the WAL it has received; a bad value is a 400.
// [noloadbalance]: 503 on a peer tagged noloadbalance (kept out of read pools).
// HEAD is answered as GET. Errors are JSON: {"error": reason}.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/failsafe_message.h"
#include "agent/http_server.h"
#include "pg/pg_status.h"
#include "statemachine/peer.h"
#include "statemachine/result.h"
#include "ops/switchover_plan.h"

namespace dugong::agent {

// What the primary of a quorum-mode cluster shows of its set (GET /quorum): the state's
// set and k, and per member its row of pg_stat_replication, if any.
struct ApiQuorumMember {
  std::string id;
  std::optional<std::string> state;      // pg_stat_replication.state (streaming, catchup, ...); none: no walsender
  std::optional<std::string> syncState;  // quorum, potential, async
  std::optional<std::string> flushLsn;
};
struct ApiQuorum {
  int k = 0;
  int readQuorum = 0;
  std::vector<ApiQuorumMember> members;
  std::optional<std::string> primaryLsn;  // the primary's pg_current_wal_lsn() of the same status poll
};
// The set of a format-2 state as this peer's postgres shows it, when this peer is its
// primary; nullopt otherwise (another role, sync mode, no state).
std::optional<ApiQuorum> apiQuorum(Role role, const std::optional<ClusterState>& state, const pg::PgStatus& postgres);

// What the endpoints decide on, taken on the agent's loop for each request.
struct ApiStatus {
  Role role = Role::kUnknown;
  bool postgresOnline = false;
  bool writablePrimary = false;
  bool streamingReplica = false;  // a streaming sync, async or standby leader
  bool streamingStandbyLeader = false;  // a standby cluster's leader streaming from its source
  std::optional<uint64_t> replayBacklogBytes;  // a standby's received-but-not-replayed WAL
  bool noloadbalance = false;
  std::optional<ApiQuorum> quorum;  // apiQuorum()
  std::function<nlohmann::json()> state;  // the /state document
  std::function<std::string()> metrics;   // the /metrics text
};

// How the mutating endpoints are guarded: the secret from http.auth.tokenFile, or
// nullopt when none is configured (they are then disabled: 403).
struct ApiAccess {
  std::optional<std::string> secret;
};

// What route() decided: a reply, or an operation to carry out (the credential and the
// body were accepted): a switchover (the candidate and the leader are checked against
// the cluster by the caller), or an operator's request to this peer ("restart" or "reload", carried
// out as a request node's: agent/request_follower.h).
struct Routed {
  HttpReply reply;
  std::optional<adm::SwitchoverAsk> switchover;
  std::optional<std::string> operatorAction = std::nullopt;  // so that {reply, nullopt} stays complete
  std::optional<FailsafeCall> failsafe = std::nullopt;       // decided by the driver
};

Routed route(const HttpRequest& request, const ApiStatus& status, const ApiAccess& access);

// A size in bytes: "1024", "16MB", "1 GB", "512kB" (units B, kB, MB, GB, TB, any case,
// powers of 1024, as postgres reads sizes). The error says why.
Result<uint64_t> parseSize(const std::string& text);

// The credential of a mutating request: "Authorization: Bearer SECRET" or HTTP basic
// authentication with SECRET as the password (any user). Compared in constant time.
bool credentialMatches(const std::string& authorization, const std::string& secret);

// {"error": reason} with `status`.
HttpReply jsonError(int status, const std::string& reason);

}  // namespace dugong::agent
