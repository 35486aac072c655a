// A standby cluster (docs/decisions/0083-standby-cluster.md): the source it follows, as
// the cluster state names it (`standby.source`, section 2), what the standby leader
// streams from (`SourceEndpoint`, 3.1), the operator's requests (`standby.promote`,
// `demote`) and the refusals of promote-cluster (6.1). Pure: no I/O, time passed in.
//
// Phase 8 (0083 section 10.2): the peer runs a standby state of every kind of source
// (standbyStateNotRun says what it does not run yet); every other reader but this file's
// and the tests refuses format 3 (cluster_state.h, Formats).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "statemachine/time_format.h"
#include "statemachine/wal_position.h"

namespace dugong {

struct ClusterState;

// What a standby cluster follows (0083 2.1).
//   dugong:     another dugong cluster, through its ZooKeeper ensemble and root;
//   hosts:      plain postgres servers, one multi-host primary_conninfo;
//   pgbackrest: no stream: WAL restored from a pgBackRest repository.
enum class SourceKind { kDugong, kHosts, kPgbackrest };
const char* sourceKindName(SourceKind kind);

// A pgBackRest repository WAL is restored from: the stanza and the repository options
// (the ones `backup.*` accepts; pg/pgbackrest.cc checks them before they are written and
// before a command runs with them). Here: a stanza, and options as strings.
struct SourceRepository {
  std::string stanza;
  std::map<std::string, std::string> options;  // "repo1-path": "/srv/pgbackrest"
  bool operator==(const SourceRepository&) const = default;
};

// "host:port" of a `hosts` source, or of one server of a ZooKeeper connect string. The
// host is a name or an IPv4 address, or an IPv6 address in brackets ("[::1]:5432").
struct HostPort {
  std::string host;  // without the brackets
  int port = 0;      // 1..65535
  std::string toString() const;
  static Result<HostPort> parse(const std::string& text);
  bool operator==(const HostPort&) const = default;
};

// `standby.source` in the cluster state: only what is not secret (passwords and
// ZooKeeper credentials stay in the hosts' dugong.yaml, 0083 2.4).
//   {"kind": "dugong", "cluster": "siteA", "zookeeper": "a1:2181,a2:2181", "chroot": "",
//    "root": "/dugong/siteA", "restore"?: {"stanza", "options"?}}
//   {"kind": "hosts", "hosts": ["h1:5432", "h2:5432"], "restore"?: {...}}
//   {"kind": "pgbackrest", "restore": {"stanza": "siteA", "options": {...}}}
// A `pgbackrest` source is its `restore` (required there); the other kinds may add one,
// restored from when streaming fails (0083 P6).
struct StandbySource {
  SourceKind kind = SourceKind::kDugong;
  // dugong
  std::string cluster;            // the source's cluster name (not empty)
  std::vector<HostPort> zookeeper;  // its ensemble's connect string, at least one server
  std::string chroot;             // "" or an absolute path
  std::string root;               // an absolute path: /dugong/siteA
  // hosts
  std::vector<HostPort> hosts;    // at least one
  std::optional<SourceRepository> restore;

  // The ensemble as a connect string: "a1:2181,a2:2181".
  std::string zookeeperConnect() const;
  // "dugong siteA (a1:2181,a2:2181/dugong/siteA)", "hosts h1:5432, h2:5432", "pgbackrest
  // stanza siteA": how logs and messages name it.
  std::string describe() const;
  // The keys of its kind only; `chroot` always for dugong, `restore` when set.
  nlohmann::json toJson() const;
  // Validates: an object; `kind` one of the three; exactly the fields of its kind (a
  // field of another kind, or one unknown, is refused: it would be lost on the next
  // write); each as described above. `where` prefixes every error ("cluster state:
  // standby.source").
  static Result<StandbySource> fromJson(const nlohmann::json& j, const std::string& where);
  bool operator==(const StandbySource&) const = default;
};

// Where a demoted cluster's last primary's WAL ended (0083 5.2): the position of its
// shutdown checkpoint record, and the timeline it was written on.
struct DemotionPoint {
  WalPosition wal;
  int64_t timeline = 1;  // >= 1
  bool operator==(const DemotionPoint&) const = default;
};

// The `standby` field of a standby state (format 3, 0083 2.2).
struct StandbyMode {
  StandbySource source;
  std::optional<DemotionPoint> demotedAt;  // set when this cluster became a standby by demote-cluster
  nlohmann::json promote;                  // null: none; kept raw, see validateStandbyPromote

  bool hasPromote() const { return !promote.is_null(); }
  nlohmann::json toJson() const;  // {"demotedAt"?, "promote"?, "source"}
  // `source` as StandbySource::fromJson; `demotedAt`, when present, {"wal": "X/Y",
  // "timeline": >= 1}; `promote` kept as it is; no other key.
  static Result<StandbyMode> fromJson(const nlohmann::json& j);
  bool operator==(const StandbyMode&) const = default;
};

// A promote-cluster request (`standby.promote`), carried out by the standby leader.
struct StandbyPromoteRequest {
  std::string by;           // who asked: "ops@jump1"
  bool sourceGone = false;  // --source-gone: the operator says the source is gone
  int64_t generation = 0;   // the generation it was made in
  EpochMs expireTime = 0;
};

// A demote-cluster request (`demote` of a normal state), carried out by the primary.
struct DemoteRequest {
  StandbySource source;     // what the cluster will follow
  std::string by;
  int64_t generation = 0;
  EpochMs expireTime = 0;
};

// Validate a raw request against the state it was found in, at time `now`, as
// validatePromote does, and say the first reason it is invalid: the schema (`by` a
// string, `sourceGone` a boolean, `generation` an integer, `expireTime` a time string;
// for demote, `source` as StandbySource::fromJson; no other key); the state is a standby
// state (promote) or a normal one (demote); the generation is the state's; not expired.
Result<StandbyPromoteRequest> validateStandbyPromote(const nlohmann::json& promote, const ClusterState& state,
                                                     EpochMs now);
Result<DemoteRequest> validateDemote(const nlohmann::json& demote, const ClusterState& state, EpochMs now);

// What the standby leader streams from (0083 3.1): PgConfig::standbyLeader's upstream,
// outside the cluster. For `dugong`, the source peer chosen by sourceUpstream (3.2) and
// the source's cluster name; for `hosts`, the list; `restore` as the source's; the slot
// the leader streams through on the source.
struct SourceEndpoint {
  SourceKind kind = SourceKind::kDugong;
  std::optional<PeerIdentity> peer;  // dugong: the source peer, as the source publishes it (its pgUrl)
  std::string cluster;               // dugong: the source's cluster name
  std::vector<HostPort> hosts;       // hosts
  std::optional<SourceRepository> restore;
  std::string slotName;              // on the source: dugong_site_<this cluster>

  nlohmann::json toJson() const;
  // "hosts h1:5432, h2:5432", "dugong siteA peer a2": how logs name it.
  std::string describe() const;
  // Compared field by field (a peer by its id and its pgUrl: a moved peer is a new
  // endpoint).
  bool operator==(const SourceEndpoint& o) const;
};

// What this build runs of a format-3 state (0083 10.2; phase 8 as built): a standby state
// of any source, with or without a `restore` repository, its promote-cluster, and a
// demote request toward a `hosts` or `dugong` source with no repository. A demote request
// toward a repository is refused with the reason, on which the peer halts as it does on a
// state it cannot read: no write, no fence, no apply. nullopt: it runs.
std::optional<std::string> standbyStateNotRun(const ClusterState& state);

// What the standby leader of a `hosts` source streams from (0083 3.1): the hosts, by one
// multi-host primary_conninfo with target_session_attrs=primary (P5). No slot: a slot on
// servers dugong does not manage would outlive this cluster and hold their WAL with nobody
// to drop it, and would be missing on the source's next primary after its own failover
// (decision 0083, "Phase 2 as built"). REQUIRES: source.kind == kHosts.
SourceEndpoint hostsEndpoint(const StandbySource& source);

// What the standby leader of a `dugong` source streams from (0083 3.1, 3.2): the source
// peer `upstream` (sourceUpstream's choice), as the source's state names it (its pgUrl),
// and the source's cluster name. No slot (as for `hosts`; decision 0083 "Phase 5 as
// built"). No upstream (its agent has read no state of the source since it started:
// 0083 "Phase 7 as built"): the source peer the leader's postgres followed last as
// standby leader of this source, else none (in recovery, replaying what it has); the pg
// adapter decides which (pg::planLeaderEndpoint). REQUIRES: source.kind == kDugong.
SourceEndpoint dugongEndpoint(const StandbySource& source, const std::optional<PeerIdentity>& upstream);

// What the standby leader of a `pgbackrest` source follows (0083 2.1, 3.1): no stream,
// WAL restored from the source's stanza (restore_command = pgbackrest archive-get, P6).
// REQUIRES: source.kind == kPgbackrest.
SourceEndpoint repositoryEndpoint(const StandbySource& source);

// The standby leader's endpoint of any kind of source: dugongEndpoint (with `upstream`),
// hostsEndpoint or repositoryEndpoint; each carries the source's `restore`, if any.
SourceEndpoint sourceEndpoint(const StandbySource& source, const std::optional<PeerIdentity>& upstream);

// `standby.source` of dugong.yaml (0083 2.4): "hosts://h1:5432,h2:5432" (IPv6 in
// brackets), "dugong://zk1:2181[,zk2:2181...]/root/of/the/source" (the source's ensemble
// and root; its cluster name is the root's last component, no chroot), or
// "pgbackrest://<stanza>" (letters, digits, '-', '_'; a source that is its `restore`,
// with no options: dugong.yaml's standby.restore gives them, agent/config.cc). Anything
// else is refused with what was expected.
Result<StandbySource> parseSourceUrl(const std::string& url);

// What the decisions need of the source's state, as read from its ensemble (0083 3.3).
struct ObservedSourceState {
  int64_t generation = 0;
  std::string primary;                 // its id
  std::optional<std::string> sync;     // its id
  bool oneNodeWriteMode = false;
  std::optional<StandbyMode> standby;  // set: the source is itself a standby cluster
  // The peers as the state names them (their pgUrl is where the leader streams from).
  PeerIdentity primaryPeer;
  std::optional<PeerIdentity> syncPeer;
  static ObservedSourceState of(const ClusterState& state);
};

// Which source peer a standby leader of a `dugong` source streams from (0083 3.2): the
// source's sync (every commit the source acknowledged is there, and the source's next
// primary is its sync, so the leader's WAL stays a prefix of the source's next history);
// its primary when it has no sync (one-node-write mode). A quorum-mode source (0089): its
// first member (ObservedSourceState::of), which holds no WAL past the next primary of a
// takeover that read it (the most advanced of the members read). A source that is itself a
// standby cluster the same way: its leader's sync, else its leader. Two sites may use the
// same peer ids (3.3 refused a source naming this peer's id, since the leader's
// application_name would then match the source's synchronous_standby_names): the leader's
// application_name toward a dugong source is "<its id>/standby-leader", which no dugong
// peer id can be (an id is part of an election node's name: no '/'), so nothing is refused.
PeerIdentity sourceUpstream(const ObservedSourceState& observed);

// What the standby leader (or dugong-adm, before it writes the request) observes when it
// decides on a promote-cluster (0083 6.1), each on its own observation: the source may
// change in between.
struct SourceObservation {
  bool reachable = false;  // dugong: its ensemble answered; hosts: a host answered; never for pgbackrest
  // How the messages name what was last seen while it is unreachable: "unreachable since
  // 00:12:03; its primary was a1, generation 9; this cluster received up to 0/9A000000,
  // at least 14 MB and 3.2 s behind then". The caller writes it (the times are its own).
  std::string lastSeen;
  // dugong, reachable: the source's state (unset: none, or not readable); whether its
  // primary has an election node; what its agent's /primary answered (unset: not asked,
  // or no answer).
  std::optional<ObservedSourceState> state;
  bool primaryPresent = false;
  std::optional<bool> primaryWritable;
  // hosts, reachable: the hosts that answered pg_is_in_recovery() false.
  std::vector<HostPort> writableHosts;
};

// This standby cluster, as the leader sees it when it decides.
struct PromoteClusterView {
  bool leaderPresent = false;             // the standby leader has an election node
  bool leaderRunsAsStandbyLeader = false; // its postgres runs as standby leader
  std::optional<int64_t> leaderTimeline;  // its timeline where its replay ends (unset: not read)
  // How a source demoted toward this cluster names it in its standby.source: this
  // cluster's name, and the chroot and root of its ensemble (the ensemble's server list
  // is not compared: two sites may write one ensemble by other names).
  std::string cluster;
  std::string chroot;
  std::string root;
  SourceObservation source;
};

struct PromoteClusterVerdict {
  std::optional<std::string> refusal;     // set: refused, and why (with what to do)
  std::optional<DemotionPoint> waitFor;   // the planned case: replay must have passed it first
  bool ok() const { return !refusal; }
};

// The refusals of promote-cluster (0083 6.1), one pure decision run by dugong-adm before
// it writes the request and by the leader before it acts, in this order:
//   1. the state is not a standby state; it is frozen; the leader is absent, or its
//      postgres does not run as standby leader;
//   2. the source has a writable primary this cluster can see (a normal source state
//      whose primary is present, a /primary answering 200, a host not in recovery):
//      refused even with `sourceGone` (the flag says "it cannot be reached", never
//      "ignore what is seen");
//   3. the source is a standby of this cluster that was not demoted (a loop made by
//      hand): refused;
//   4. the planned case, with or without the flag: the source is a standby state with
//      `demotedAt`, demoted toward this cluster, and the leader is on the demotion's
//      timeline: go ahead once replay has passed `demotedAt` (waitFor);
//   5. anything else needs `sourceGone` (the source unreachable, a repository, between
//      primaries, demoted toward another cluster, a stale demotion): without it, refused
//      with what was seen; with it, go ahead (what was not received is lost).
// `state` is this cluster's state.
PromoteClusterVerdict promoteClusterRefusal(const ClusterState& state, bool sourceGone, const PromoteClusterView& view);

// A normal cluster as dugong-adm sees it when it decides on a demote-cluster (0083 5.1).
struct DemoteClusterView {
  bool primaryPresent = false;  // the primary has an election node
  bool syncPresent = false;     // the sync has one
  // The primary's walsender to the sync streams synchronously (pg_stat_replication, from
  // the primary's /state); `syncDetail` says what was seen when not.
  bool syncStreams = false;
  std::string syncDetail;
  std::vector<HostPort> ownHosts;  // this cluster's peers' postgres, host:port (their pgUrl)
};

// The refusals of demote-cluster (0083 5.1; phase 4 as built), in this order, each with
// what to do: the cluster is a standby cluster already; a demote request is pending; it is
// frozen, in one-node-write mode, or in quorum mode; the source is a `pgbackrest` source
// or has a repository (not run yet); a `hosts` source names a peer of this cluster (it would
// follow itself); its primary is not present; its sync is not present, or does not stream
// synchronously (the sync must receive the primary's last WAL, its shutdown checkpoint).
// A source that cannot be reached is not refused: the demoted cluster waits for it.
std::optional<std::string> demoteClusterRefusal(const ClusterState& state, const StandbySource& source,
                                                const DemoteClusterView& view);

}  // namespace dugong
