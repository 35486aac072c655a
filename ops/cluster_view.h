// What dugong-adm knows about a cluster at one moment: the state in ZooKeeper, the
// peers with a live session, and what each peer's agent says about itself (GET /state).
// The model and the functions over it are pure; fetching lives in cluster_fetch.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/cluster_state.h"
#include "statemachine/identity.h"
#include "statemachine/time_format.h"

namespace dugong::adm {

// The role `id` holds in `state`: "primary", "sync" (in quorum mode, any member),
// "async", "deposed", or "" (none).
std::string roleInState(const ClusterState& state, const std::string& id);
// The sync, or in quorum mode the first member (0079): the head of the async chain and
// the peer a switchover or a rolling restart makes primary unless told otherwise. nullptr
// in one-node-write mode.
const PeerIdentity* firstSync(const ClusterState& state);
// The sync_state a synchronous standby's stream shows: "quorum" in quorum mode, else "sync".
inline const char* synchronousState(const ClusterState& state) { return state.quorum ? "quorum" : "sync"; }

struct PeerView {
  PeerIdentity identity;
  // From the cluster state: "primary", "sync", "async", "deposed", or "unassigned"
  // (active in ZooKeeper but not in the state). A member of a quorum-mode set (format 2,
  // docs/decisions/0079) is a "sync" with its memberIndex.
  std::string role;
  int asyncIndex = -1;      // for "async"
  int memberIndex = -1;     // for a member of the quorum set: its place in quorum.members
  bool active = false;      // has an election node (a live ZooKeeper session)
  // The agent's GET /state body; null when the agent did not answer (then agentError
  // says why) or has no status URL (backupUrl).
  nlohmann::json status;
  std::string agentError;

  bool reachable() const { return status.is_object(); }
  bool member() const { return memberIndex >= 0; }
  // Role as printed in tables: "async" carries its index ("async[1]") only when asked;
  // a quorum member is "sync", or "member" when asked for the detail.
  std::string roleLabel(bool withIndex) const;
};

struct ClusterView {
  std::string cluster;
  std::string root;
  ClusterState state;
  int32_t version = -1;
  PeerList active;  // session order
  // primary, sync (or the quorum members in set order), asyncs in order, deposed, then
  // unassigned
  std::vector<PeerView> peers;
  EpochMs now = 0;

  const PeerView* find(const std::string& id) const;
  // The peer streaming from `id` in the replication chain (primary -> sync -> async[0]
  // -> async[1] ...), or nullptr. In quorum mode every member streams from the primary
  // and the chain hangs from the first member: the primary's downstream is that member.
  const PeerView* downstreamOf(const std::string& id) const;
  // The peer `id` streams from, or nullptr (the primary, deposed and unassigned peers).
  const PeerView* upstreamOf(const std::string& id) const;
};

// The peers in display order, without agent statuses (status null). The identity of a
// peer comes from its election node when it is active (fresher), else from the state.
// Every member of a quorum-mode set is listed, present or not (a member whose agent is
// gone has a row, inactive).
std::vector<PeerView> listPeers(const ClusterState& state, const PeerList& active);

// Why `p` has an election node, in words for a refusal: its agent runs (it answered
// over HTTP), or only its session is still open (a stopped agent's session lives on until
// its timeout, and an agent keeps it across a restart; `dugong --leave` ends it at once).
std::string whyActive(const PeerView& p);

// ---- reading an agent's status (all tolerate missing or mistyped fields)

// The agent's base URL: identity.backupUrl without a trailing '/', or nullopt.
std::optional<std::string> agentUrl(const PeerIdentity& peer);
bool pgOnline(const PeerView& p);
bool pgWritable(const PeerView& p);  // online, not in recovery, not read-only
// The peer's own WAL position: current on a primary, max(receive, replay) on a standby.
std::optional<WalPosition> ownWal(const PeerView& p);
std::optional<double> replayLagSeconds(const PeerView& p);
// A standby's replay is paused (its /state's postgres.replayPaused).
bool replayPaused(const PeerView& p);
std::optional<std::string> walReceiverStatus(const PeerView& p);
// Why the agent's last automatic rejoin failed ("" when none did, or it did not say).
std::string lastRejoinError(const PeerView& p);
// The row of `upstream`'s pg_stat_replication whose application_name is `downstreamId`.
std::optional<nlohmann::json> replicationRow(const PeerView& upstream, const std::string& downstreamId);
// In a quorum-mode view: the member whose stream the primary's commits wait for (the
// k-th latest flush among the members its pg_stat_replication shows streaming with
// sync_state quorum), or nullptr (sync mode, the primary silent, fewer than k such).
const PeerView* quorumWaitedMember(const ClusterView& view);
// Bytes by which `downstream` replays behind `upstream` (upstream's own WAL minus the
// replay position in upstream's replication row for it), or nullopt when unknown.
std::optional<uint64_t> lagBytes(const PeerView& upstream, const std::string& downstreamId);

// "1m05s", "0m00s"; "-" for nullopt.
std::string formatLagSeconds(std::optional<double> seconds);

// ---- the rows of `peers` and `pg-status`

// Every column a row can have, by name (the "-o" names).
const std::vector<std::string>& allColumns();
const std::vector<std::string>& peersDefaultColumns();
const std::vector<std::string>& pgStatusDefaultColumns();
const std::vector<std::string>& pgStatusWideColumns();

// One row per peer; cells by column name. REPL, SENT, WRITE, FLUSH, REPLAY and
// LAGBYTES describe replication from this peer to its downstream (as manatee-adm
// pg-status does); a quorum-mode primary's row, the stream its commits wait for: the
// member with the k-th latest flush among those streaming with sync_state quorum
// (quorumWaitedMember); LAG is this peer's own replay lag; PG is "ok", "fail" (postgres not
// accepting connections) or "unknown" (agent did not answer).
struct StatusRow {
  std::string role;
  std::string id;
  nlohmann::json cells;  // column name -> string, or number/null for lagbytes and timeline
  std::string cell(const std::string& column) const;  // as printed; "-" for null
};
std::vector<StatusRow> statusRows(const ClusterView& view);
// Keeps the rows whose role is `role` ("async" matches every async); empty: all.
std::vector<StatusRow> filterRole(std::vector<StatusRow> rows, const std::string& role);
// The roles -r accepts.
const std::vector<std::string>& knownRoles();

}  // namespace dugong::adm
