// The per-peer state machine of the Manatee v2 algorithm (seeds/manatee-state-machine.txt).
//
// Pure: events in, actions out. No I/O, no clock (the caller passes the time with each
// event), no threads. The same sequence of (time, event) gives the same actions.
//
// Thread-safety: none; one caller steps a Peer at a time.
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/action.h"
#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"
#include "statemachine/quorum.h"
#include "statemachine/time_format.h"

namespace dugong {

// kStandbyLeader: the state's `primary` in a standby state (docs/decisions/0083 3.1): in
// recovery, following the standby cluster's source; never promoted while the state says
// standby. A role of its own: every path that makes a primary writable keys on kPrimary.
enum class Role { kUnknown, kUnassigned, kPrimary, kSync, kAsync, kDeposed, kStandbyLeader };
const char* roleName(Role role);

struct PeerOptions {
  PeerIdentity self;
  // One-node-write mode: with no cluster state, set up a frozen single-peer cluster at
  // once; never act on other peers.
  bool singleton = false;
  // Back-off before evaluating again after a failed condition, write or apply.
  int64_t retryDelayMs = 1000;
  // A cluster with no state is set up from the peers' published data states (the
  // daemon): once every present peer has published one, from the peer with the most
  // advanced WAL among those holding data (after setupWaitMs, for more of them to come
  // back), by nobody while they hold different database systems; at once by the first
  // in session order when every present peer is empty. A state that disappears is
  // forgotten (postgres stops) and the cluster set up again by the same rule.
  // false (the simulators, which model no data state): the first in session order sets
  // up, only over a data directory never set up; a state that disappears halts the peer.
  bool setupFromData = false;
  int64_t setupWaitMs = 0;
  // After replacing a sync that acknowledged nothing, the primary replaces no other for
  // that reason for a hold: this long after the first, twice the previous hold after one
  // that came within two holds of the one before (up to 64 times this), and this long
  // again once two holds passed without one. A link that comes and goes costs a
  // generation per hold, the holds doubling; two faults a minute apart cost nothing.
  int64_t syncReplaceHoldMs = 5000;
  // Quorum mode (docs/decisions/0079-quorum-commit.md, peer_quorum.cc): read every format
  // (ClusterState::Formats::kAll) and run format 2's rules: a member's fence, read and
  // report, the takeover decided from the reports, the primary's membership steps, and a
  // sync-mode state re-encoded when ReplicationWanted asks for quorum mode. The agent
  // always sets it (docs/decisions/0089). Off (the sync-mode simulations and tests): a
  // format-2 state halts the peer as any state it does not run, and nothing here changes
  // by one byte.
  bool quorum = false;
  // A standby cluster's source (docs/decisions/0083 4.1, dugong.yaml's standby.source): a
  // cluster with no state is set up as a standby cluster of it (generation 1 a standby
  // state, its first peer the standby leader) instead of a normal one. Ignored once a
  // state exists.
  std::optional<StandbySource> standbySource = std::nullopt;
};

class Peer {
 public:
  explicit Peer(PeerOptions options);
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Feeds one event that happened at `now`; returns what to do, in order (action.h).
  std::vector<Action> step(EpochMs now, const Event& event);

  Role role() const { return role_; }
  const PeerIdentity& self() const { return opts_.self; }
  // The last valid cluster state seen (or written) and its version.
  const std::optional<ClusterState>& clusterState() const { return state_; }
  int32_t stateVersion() const { return stateVersion_; }
  // The active peers in session order; absent until ZooKeeper is initialised.
  const std::optional<PeerList>& activePeers() const { return active_; }
  // True while a write, WAL read or postgres transition is in flight, or a timer pends.
  bool busy() const;
  // True while a write, WAL read, fence or postgres transition is in flight: the peer
  // waits for its completion event.
  bool awaitingCompletion() const { return update_ != Update::kNone || pgApplying_.has_value(); }
  // Why this peer stopped acting (invalid state, fatal error), if it did.
  std::optional<std::string> haltReason() const;

  // Role, last state seen, active peers, postgres view and pending work.
  nlohmann::json inspect() const;
  // The postgres configuration this peer's role asks for now (none before a state is
  // known): what a restart of postgres may apply without going against the state machine.
  PgConfig wantedPgConfig() const { return state_ ? desiredPgConfig() : PgConfig::none(); }
  // True while a configuration from before a fence must not be applied (not by a restart
  // either): a takeover's state write failed in a way that it may have landed (a primary's
  // new sync, or this sync the new primary), and the state machine does not know yet
  // whether it did; or, in quorum mode, this member's takeover report stands (published,
  // being published or withdrawn, or found in its election node): a takeover may count
  // it, so postgres must stream nothing until it is withdrawn. The wanted configuration
  // (wantedPgConfig) stays the member's: this is what keeps its fence across a restart.
  // Before any such write, a restart only makes the takeover fence again.
  bool keepsFence() const {
    return unsettledWrite_.has_value() || quorum_.mine.has_value() || quorum_.publishing;
  }

 private:
  enum class Update { kNone, kFencing, kReadingWal, kWriting };
  // kFenced: postgres acknowledges nothing under the old topology (fencedFor_ names the
  // new sync, or is empty for a standby that stopped streaming). kDirty: a fence may
  // be partly in place; the configuration must be applied again.
  enum class Fence { kNone, kFenced, kDirty };

  void onZkInitialized(const ZkInitialized& e);
  void onClusterState(const StateNode& node);
  void onPgApplied(const PgConfigApplied& e);
  void onPgFenced(const PgFenced& e);
  void onWriteFinished(const StateWriteFinished& e);
  void onWalRead(const WalPositionRead& e);
  void onTimer(const TimerFired& e);
  void onSyncAcknowledgement(const SyncAcknowledgement& e);
  void onReportPublished(const ReportPublished& e);

  void evaluate();
  void evaluateNoState();
  void evaluateSetupFromData();
  void evaluatePrimary();
  void evaluateOnwmPrimary();
  // Drops absent asyncs from the chain and appends newcomers (not the `synchronous` ones).
  void asyncChain(const PeerList& synchronous);
  void evaluateSync();
  // A standby cluster's (peer_standby.cc, docs/decisions/0083 3.4).
  void evaluateStandbyLeader();
  ClusterState standbyTakeover(WalPosition wal) const;
  void onSourceObserved(const SourceObserved& e);
  // The standby leader's endpoint; for a `dugong` source whose upstream is not known yet
  // (no state of the source read since this agent started), one with no source peer: the
  // pg adapter keeps the one it followed last as this source's standby leader, else none.
  SourceEndpoint standbyEndpoint() const;
  PromoteClusterView promoteClusterView(WalPosition wal) const;
  // demote-cluster (0083 5.2; peer_standby.cc): the primary carries out a demote request.
  void evaluateDemotion();
  // Whether this primary's postgres is to be down for a demotion: a valid demote request
  // in the state, or one whose stop is done (carried out whatever its expiry then).
  bool demoting() const;
  // "; a standby cluster of hosts h1:5432" for a setup with opts_.standbySource, else "".
  std::string standbySetup() const;
  // Quorum mode (peer_quorum.cc).
  void evaluateMember();
  void evaluateQuorumPrimary();
  void removePromote(const std::string& reason);
  void runMembershipStep(const MembershipStep& step);
  // Fences the primary for a step that makes postgres acknowledge less easily: true
  // once the fence (reload, verification, catch-up) of exactly this step holds.
  bool quorumFenced(const MembershipStep& step);
  // A member removed for acknowledging nothing is held back from membership for
  // syncReplaceHoldMs, doubled when it is removed again within twice its last hold (up to
  // 64 times): its link may still be held, streaming and acknowledging nothing. Returns
  // the words for the step's log line.
  std::string holdBack(const std::string& id);
  // Publishes `report` in this peer's election node (none: withdraws it).
  void publishReport(std::optional<TakeoverReport> report, const std::string& why);
  // A report standing is withdrawn before postgres is configured again: true while the
  // configuration must wait for that (a taker, primary now, promotes meanwhile).
  bool reportHoldsFence();
  QuorumPresence quorumPresence() const;
  QuorumWanted quorumWanted() const;
  nlohmann::json inspectQuorum() const;
  Role roleFromState(const ClusterState& s) const;
  PgConfig desiredPgConfig() const;
  void applyPg(const PgConfig& desired);

  // New generations. Each needs a WAL position read in this evaluation.
  ClusterState syncTakeover(WalPosition wal) const;
  ClusterState primaryTakeover(WalPosition wal) const;
  ClusterState promoteFirstAsync(WalPosition wal) const;
  ClusterState leaveOnwm(WalPosition wal) const;
  ClusterState replaceStalledSync(WalPosition wal, const PeerList& order) const;
  ClusterState nextGeneration(WalPosition wal) const;
  std::optional<std::string> offTheGenerationsHistory() const;
  // The new primary's check of its own history against the generation's initWal (after a
  // takeover): true when nothing is left to do; otherwise it reads, fences or writes.
  bool checkInitWalOnOwnHistory();

  // Reads the WAL first if this evaluation has none; returns the position once read.
  std::optional<WalPosition> walForTakeover(const std::string& why);
  // Fences postgres first (commits wait for `newSync`; none: stop streaming), then
  // reads the WAL; returns the position once both are done. Keeps the fence in place
  // for the rest of this evaluation.
  std::optional<WalPosition> fencedWal(const std::string& why, const std::optional<PeerIdentity>& newSync);
  void writeState(ClusterState next, const std::string& reason, std::vector<ElectionNodeCheck> checks = {});
  // A takeover's write of unknown outcome: write the state as read back, test-and-set at
  // the version the takeover expected, unless news came meanwhile.
  void settleUnknownWrite();
  // A condition failed: say why (once per distinct reason) and evaluate again later.
  void blocked(const std::string& why, bool retry);
  void retryLater();
  void startTimer(TimerId id, int64_t delayMs);
  void log(LogLevel level, std::string message);

  // Postgres runs with the configuration of this peer's current role: a takeover
  // starts from there.
  bool pgReady() const;
  bool isActive(const std::string& id) const;
  PeerList presentAsyncs() const;
  // Whether `p` may be made the sync: not tagged nofailover in its election node (the
  // identity it publishes now), or, when absent, in the identity given.
  bool maySync(const PeerIdentity& p) const;
  // Whether `p` streams, as far as this peer knows: not named in the election nodes'
  // notStreaming (a peer that publishes nothing counts as streaming).
  bool streams(const PeerIdentity& p) const { return notStreaming_.count(p.id) == 0; }
  // `peers` with the new sync moved to the front, the others in their order: the first
  // that may be made the sync and streams, else the first that may be made the sync;
  // nullopt when none may.
  std::optional<PeerList> withSyncFirst(const PeerList& peers) const;
  // ", passing over a, b, which do not stream" when the new sync at the front of `order`
  // (from withSyncFirst(peers)) comes after peers that may be the sync but do not
  // stream; "" otherwise. For the reason of a new generation.
  std::string passedOver(const PeerList& peers, const PeerList& order) const;
  // Why no present async can become the new sync, for the log.
  std::string noSyncCandidate() const;
  bool isSelf(const PeerIdentity& p) const { return p.id == opts_.self.id; }
  std::string describe(const ClusterState& s) const;

  PeerOptions opts_;
  Role role_ = Role::kUnknown;

  bool zkInitialized_ = false;
  bool sessionKept_ = false;  // the session was held by a previous run of the agent
  std::optional<ClusterState> state_;
  int32_t stateVersion_ = -1;
  bool everSawState_ = false;
  std::optional<PeerList> active_;
  PeerDataStates dataStates_;  // published by the active peers
  std::set<std::string> notStreaming_;  // active peers that publish that they do not stream
  std::optional<EpochMs> setupWaitSince_;  // no state, and a present peer holds data

  bool pgInitialized_ = false;
  bool pgOnline_ = false;
  bool pgSetUp_ = false;
  std::optional<PgConfig> pgApplied_;   // last configuration applied successfully
  std::optional<PgConfig> pgApplying_;  // in flight
  Fence fence_ = Fence::kNone;
  std::string fencedFor_;
  PgInstance fencedInstance_ = 0;
  // What a standby leader's fence saw of the source (PgFenced::source), for its own
  // promote-cluster check; valid while fence_ is kFenced.
  std::optional<SourceObservation> fencedSource_;
  // A standby cluster of a `dugong` source (0083 3.3, peer_standby.cc): the last
  // observation of the source, and the source peer the leader streams from (kept while the
  // source cannot be read: an unreachable source changes nothing in postgres; unset until
  // a state of the source is read, when postgres runs with no source peer chosen).
  std::optional<SourceObserved> sourceSeen_;
  std::optional<PeerIdentity> sourceUpstream_;
  // When sourceSeen_ was reported, and the promote-cluster request this leader saw last
  // (its text) and since when: a dugong source's look judges a request only once it is
  // newer than the request, or a full look (kSourceLookMs) has passed with no change.
  EpochMs sourceSeenAt_ = 0;
  std::string promoteClusterAsked_;
  EpochMs promoteClusterAskedAt_ = 0;
  bool keepFence_ = false;  // this evaluation is in the middle of a takeover

  Update update_ = Update::kNone;
  std::string updateReason_;
  std::optional<ClusterState> writing_;
  bool holdUpdates_ = false;  // a write or WAL read failed: wait for the retry timer or news
  // A takeover's write failed but may have landed (connection loss, session expired): the
  // version it expected. The fence stays until news of the state or a write of this peer
  // test-and-set at that version (which the takeover's can then no longer follow).
  std::optional<int32_t> unsettledWrite_;
  // Found primary on this state machine's first session: postgres runs as primary only
  // once a write of this peer has landed (see evaluate()).
  bool confirmingStart_ = false;
  std::optional<WalPosition> freshWal_;   // read for this evaluation only
  std::optional<TimelineHistory> freshHistory_;  // read with it
  std::set<TimerId> timers_;

  // The primary's agent said its sync acknowledges nothing, in this generation.
  std::optional<SyncAcknowledgement> stalledSync_;
  int64_t stalledGeneration_ = 0;
  // The hysteresis after a removal for a stall (a sync replaced, a member removed): a hold
  // of syncReplaceHoldMs from it, doubled when the next comes within twice the last hold
  // (up to 64 times), the base again after that.
  struct StallHold {
    std::optional<EpochMs> since;  // the last removal
    int64_t holdMs = 0;
    EpochMs until() const { return since ? *since + holdMs : 0; }
    // A removal now: the next hold; true when it doubled.
    bool renew(EpochMs now, int64_t baseMs) {
      const bool soonAgain = since && now < *since + 2 * holdMs;
      holdMs = soonAgain ? std::min(2 * holdMs, 64 * baseMs) : baseMs;
      since = now;
      return soonAgain;
    }
  };
  // The hold after a sync last replaced for a stall (sync mode).
  StallHold stallHold_;

  // The quorum protocol's fields (quorum mode, peer_quorum.cc).
  struct QuorumProtocol {
    TakeoverReports seen;  // the present peers' published reports, with their node versions
    // This member's report as its election node holds it: published (nodeVersion >= 0),
    // or one that may be there (a publication that failed, nodeVersion -1, or found there
    // by a new session): it stands until a withdrawal is confirmed.
    std::optional<TakeoverReport> mine;
    bool publishing = false;                  // a PublishReport in flight
    std::optional<TakeoverReport> publishingWhat;  // what it publishes (none: a withdrawal)
    std::optional<ReplicationWanted> wanted;  // from the cluster configuration
    std::map<std::string, std::string> stalled;  // members that acknowledge nothing: what was seen
    // Peers removed as members for acknowledging nothing (0079 5.3): not added back
    // before their hold's end (holdBack).
    std::map<std::string, StallHold> heldBack;
    std::string waiting;                      // why a takeover waits (inspect)
    std::optional<MembershipStep> step;       // the membership step under way
  };
  QuorumProtocol quorum_;

  int64_t primaryGeneration_ = 0;  // the generation in which this peer last acted as primary
  // The generation this peer took over in (as its sync): once its postgres runs as that
  // generation's primary, it checks that initWal is on its own history (0: nothing to check).
  int64_t historyCheck_ = 0;
  std::optional<std::string> halted_;  // invalid state: record, do not act
  // Postgres refused a configuration that would replace data the cluster may need:
  // nothing is tried again until an operator acts (and restarts the agent).
  std::optional<std::string> refused_;
  std::optional<std::string> fatal_;
  std::string lastBlocked_;

  EpochMs now_ = 0;
  std::vector<Action>* out_ = nullptr;
};

}  // namespace dugong
