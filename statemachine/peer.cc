#include "statemachine/peer.h"
#include "statemachine/overloaded.h"

#include <algorithm>
#include <map>
#include <utility>

#include "statemachine/promote_request.h"

namespace dugong {

const char* roleName(Role role) {
  switch (role) {
    case Role::kUnassigned:
      return "unassigned";
    case Role::kPrimary:
      return "primary";
    case Role::kSync:
      return "sync";
    case Role::kAsync:
      return "async";
    case Role::kDeposed:
      return "deposed";
    case Role::kStandbyLeader:
      return "standby-leader";
    case Role::kUnknown:
      break;
  }
  return "unknown";
}

const char* timerName(TimerId id) {
  return id == TimerId::kRetryPgApply ? "retry-postgres-apply" : "retry-evaluation";
}

Peer::Peer(PeerOptions options) : opts_(std::move(options)) {}

std::vector<Action> Peer::step(EpochMs now, const Event& event) {
  std::vector<Action> actions;
  now_ = now;
  out_ = &actions;
  std::visit(Overloaded{
                 [this](const ZkInitialized& e) { onZkInitialized(e); },
                 [this](const ActivePeersChanged& e) {
                   if (!zkInitialized_ || role_ == Role::kDeposed) return;
                   active_ = e.active;
                   dataStates_ = e.data;
                   notStreaming_ = e.notStreaming;
                   if (opts_.quorum) quorum_.seen = e.reports;
                   evaluate();
                 },
                 [this](const ClusterStateChanged& e) {
                   if (!zkInitialized_ || role_ == Role::kDeposed) return;
                   onClusterState(e.state);
                   evaluate();
                 },
                 [this](const PgInitialized& e) {
                   pgInitialized_ = true;
                   pgOnline_ = e.online;
                   pgSetUp_ = e.setUp;
                   evaluate();
                 },
                 [this](const PgConfigApplied& e) { onPgApplied(e); },
                 [this](const PgFenced& e) { onPgFenced(e); },
                 [this](const StateWriteFinished& e) { onWriteFinished(e); },
                 [this](const WalPositionRead& e) { onWalRead(e); },
                 [this](const TimerFired& e) { onTimer(e); },
                 [this](const SyncAcknowledgement& e) {
                   if (zkInitialized_) onSyncAcknowledgement(e);
                 },
                 [this](const ReportPublished& e) { onReportPublished(e); },
                 [this](const ReplicationWanted& e) {
                   if (!opts_.quorum) return;
                   quorum_.wanted = e;
                   evaluate();
                 },
                 [this](const SourceObserved& e) { onSourceObserved(e); },
             },
             event);
  out_ = nullptr;
  return actions;
}

void Peer::onZkInitialized(const ZkInitialized& e) {
  if (role_ == Role::kDeposed) return;
  zkInitialized_ = true;
  sessionKept_ = e.sessionKept;
  active_ = e.active;
  dataStates_ = e.data;
  notStreaming_ = e.notStreaming;
  if (opts_.quorum) {
    quorum_.seen = e.reports;
    // A report that stood in the node of a session that ended was written into this
    // session's new node by the session, at a version its publication was not answered
    // with: it counts as unpublished (still standing, so the fence stays) until this
    // member publishes it again, or its own takeover write would check the old node's
    // version and fail every time.
    if (!e.sessionKept && quorum_.mine && quorum_.mine->nodeVersion >= 0) {
      quorum_.mine->nodeVersion = -1;
      log(LogLevel::kInfo, "a new ZooKeeper session: this member's takeover report (" + quorum_.mine->describe() +
                               ") counts as unpublished until it is published again");
    }
    // A report of this peer's that its election node still holds (an agent restarted
    // with its session): it stands until withdrawn, before anything is applied.
    auto mine = e.reports.find(opts_.self.id);
    if (mine != e.reports.end() && !quorum_.mine && !quorum_.publishing) {
      quorum_.mine = mine->second;
      log(LogLevel::kInfo, "found this member's takeover report (" + mine->second.describe() +
                               ") in its election node: it stands until withdrawn");
    }
  }
  // Read afresh by a new session: whatever its version, this is the state now (a lower
  // version than before means the node was deleted and written again meanwhile).
  stateVersion_ = -1;
  onClusterState(e.state);
  evaluate();
}

void Peer::onClusterState(const StateNode& node) {
  if (!node.exists && opts_.setupFromData) {
    if (state_) {
      log(LogLevel::kWarn, "the cluster state is gone from ZooKeeper (deleted, or the ensemble lost it): forgetting "
                           "it and stopping postgres; the cluster is set up again from the present peer with the most "
                           "advanced WAL once every present peer has published what its data directory holds");
    }
    state_.reset();
    stateVersion_ = -1;
    halted_.reset();
    return;
  }
  if (node.exists) setupWaitSince_.reset();
  if (!node.exists) {
    if (everSawState_) {
      halted_ = "the cluster state was deleted from ZooKeeper; not acting until a valid state is written";
      log(LogLevel::kError, *halted_);
    }
    // Written again, the node starts over at version 0: the next one seen is news.
    stateVersion_ = -1;
    return;
  }
  if (state_ && node.version < stateVersion_) return;  // older than what we wrote or saw
  auto parsed = ClusterState::parse(node.data, opts_.quorum ? ClusterState::Formats::kAll
                                                             : ClusterState::Formats::kSyncAndStandby);
  // A format-3 state of a kind this build does not run is refused as one it cannot read.
  if (auto notRun = parsed ? standbyStateNotRun(parsed.value()) : std::nullopt) parsed = Error{*notRun};
  if (!parsed) {
    halted_ = "invalid cluster state (version " + std::to_string(node.version) + "): " + parsed.error() +
              "; not acting until a valid state is written";
    log(LogLevel::kError, *halted_);
    return;
  }
  if (halted_) log(LogLevel::kInfo, "valid cluster state found again (version " + std::to_string(node.version) + ")");
  halted_.reset();
  if (!state_ || node.version != stateVersion_) {
    holdUpdates_ = false;     // news: a held write may go again
    unsettledWrite_.reset();  // and whether a takeover's write landed is in the state now
  }
  state_ = std::move(parsed).value();
  stateVersion_ = node.version;
  everSawState_ = true;
}

void Peer::onPgApplied(const PgConfigApplied& e) {
  if (!pgApplying_) return;
  pgOnline_ = e.online;
  fence_ = e.ok || fence_ == Fence::kNone ? Fence::kNone : Fence::kDirty;
  if (e.ok) {
    pgApplied_ = pgApplying_;
    log(LogLevel::kInfo, std::string("postgres is configured as ") + pgRoleName(pgApplied_->role) +
                             (e.online ? " and running" : " and stopped"));
  } else if (e.refused) {
    pgApplied_.reset();
    refused_ = "halted: postgres refused the configuration as " + std::string(pgRoleName(pgApplying_->role)) +
               ", and trying again cannot change that: " + e.error;
    log(LogLevel::kError, *refused_);
  } else {
    pgApplied_.reset();
    log(LogLevel::kWarn, "applying the postgres configuration failed: " + e.error + "; retrying in " +
                             std::to_string(opts_.retryDelayMs) + " ms");
    startTimer(TimerId::kRetryPgApply, opts_.retryDelayMs);
  }
  pgApplying_.reset();
  evaluate();
}

void Peer::onPgFenced(const PgFenced& e) {
  if (update_ != Update::kFencing) return;
  update_ = Update::kNone;
  fencedSource_ = e.ok ? e.source : std::nullopt;
  if (e.ok) {
    fence_ = Fence::kFenced;
    fencedInstance_ = e.instance;
  } else {
    fence_ = Fence::kDirty;
    holdUpdates_ = true;
    blocked("fencing postgres failed (" + e.error + ") for: " + updateReason_, true);
  }
  updateReason_.clear();
  evaluate();
}

void Peer::onWriteFinished(const StateWriteFinished& e) {
  if (update_ != Update::kWriting || !writing_) return;
  update_ = Update::kNone;
  if (e.ok) {
    if (e.newVersion > stateVersion_) {
      state_ = std::move(writing_);
      stateVersion_ = e.newVersion;
      everSawState_ = true;
      halted_.reset();
    }
    unsettledWrite_.reset();
    confirmingStart_ = false;
    log(LogLevel::kInfo, "wrote the cluster state: " + updateReason_);
  } else {
    // A takeover's write that did not lose the race may have been applied all the same
    // (the request reached ZooKeeper before the connection went): until that is known,
    // postgres keeps its fence, or a sync would stream from the old primary again. A lost
    // race proves only that this write did not land; an earlier one still may have. So
    // does a write the driver never sent (notSent).
    if (!e.lostRace && !e.notSent && fence_ != Fence::kNone && !unsettledWrite_) unsettledWrite_ = stateVersion_;
    log(LogLevel::kWarn, std::string("cluster-state write failed (") + updateReason_ + "): " +
                             (e.lostRace ? "another writer changed the state first" : e.error) +
                             "; waiting for the current state before trying again");
    holdUpdates_ = true;
    retryLater();
  }
  writing_.reset();
  updateReason_.clear();
  evaluate();
}

void Peer::onWalRead(const WalPositionRead& e) {
  if (update_ != Update::kReadingWal) return;
  update_ = Update::kNone;
  if (e.position && fence_ == Fence::kFenced && e.instance != fencedInstance_) {
    // Postgres restarted since it was fenced (with its old configuration): the fence
    // is gone, and so is this position's guarantee. Fence again.
    fence_ = Fence::kDirty;
    log(LogLevel::kWarn, "postgres restarted after it was fenced (" + updateReason_ + "); fencing again");
  } else if (e.position) {
    freshWal_ = e.position;
    freshHistory_ = e.history;
  } else {
    holdUpdates_ = true;
    blocked("cannot read the WAL position (" + e.error + ") for: " + updateReason_, true);
  }
  updateReason_.clear();
  evaluate();
  freshWal_.reset();
  freshHistory_.reset();
}

void Peer::onTimer(const TimerFired& e) {
  timers_.erase(e.id);
  if (e.id == TimerId::kRetryEvaluation) holdUpdates_ = false;
  evaluate();
}

bool Peer::busy() const { return update_ != Update::kNone || pgApplying_.has_value() || !timers_.empty(); }

std::optional<std::string> Peer::haltReason() const {
  if (fatal_) return fatal_;
  return refused_ ? refused_ : halted_;
}

// ---- evaluation --------------------------------------------------------------------

void Peer::evaluate() {
  if (fatal_ || refused_) return;
  if (role_ == Role::kDeposed) {  // terminal: only postgres is kept stopped
    applyPg(PgConfig::none());
    return;
  }
  if (!zkInitialized_ || !pgInitialized_) return;
  if (update_ != Update::kNone) return;  // evaluated again when the write or read finishes
  if (halted_) return;
  keepFence_ = false;
  if (unsettledWrite_ && state_) {
    keepFence_ = true;
    settleUnknownWrite();
    return;
  }

  if (!state_) {
    evaluateNoState();
    applyPg(PgConfig::none());
    return;
  }
  const ClusterState& s = *state_;
  if (opts_.singleton && !s.oneNodeWriteMode) {
    fatal_ = "this peer is configured for one-node-write mode, but the cluster (generation " +
             std::to_string(s.generation) + ", primary " + s.primary.id +
             ") is in normal mode; remove the singleton setting from this peer's configuration";
    out_->push_back(Fatal{*fatal_});
    return;
  }

  Role next = roleFromState(s);
  // A primary named standby leader of a later generation demoted itself (demote-cluster):
  // not deposed.
  const bool demoted = next == Role::kStandbyLeader && s.standby->demotedAt;
  if (role_ == Role::kPrimary && next != Role::kPrimary && !demoted && s.generation > primaryGeneration_) {
    log(LogLevel::kWarn, "deposed: generation " + std::to_string(s.generation) + " names " + s.primary.id +
                             " as primary; stopping postgres until this peer is rebuilt");
    next = Role::kDeposed;
  }
  if (next != role_) {
    log(LogLevel::kInfo, std::string("role ") + roleName(role_) + " -> " + roleName(next) + " (" + describe(s) + ")");
    // A new state machine (a new agent, so a new session) that finds itself primary: a
    // takeover decided while its previous session was gone may still be on its way, a
    // test-and-set at the version read. Postgres runs as primary only once a write of
    // this peer, test-and-set at the version read, has landed: after it, no such
    // takeover can. One-node-write mode has no peer to take over; a session
    // kept across an agent restart never expired.
    confirmingStart_ = role_ == Role::kUnknown && next == Role::kPrimary && !s.oneNodeWriteMode && !sessionKept_;
    role_ = next;
    lastBlocked_.clear();
  }

  switch (role_) {
    case Role::kPrimary:
      primaryGeneration_ = s.generation;
      if (confirmingStart_) {
        if (update_ == Update::kNone) {
          writeState(s, "confirming that this peer, starting as primary of generation " +
                            std::to_string(s.generation) + ", is still primary: writing back the state as read (version " +
                            std::to_string(stateVersion_) +
                            ") before postgres runs as primary, so that no takeover decided while its previous "
                            "session was gone can land after it");
        }
        return;
      }
      if (s.oneNodeWriteMode) {
        evaluateOnwmPrimary();
      } else {
        evaluatePrimary();
      }
      break;
    case Role::kSync:
      evaluateSync();
      break;
    case Role::kStandbyLeader:
      evaluateStandbyLeader();
      break;
    case Role::kDeposed:
      applyPg(PgConfig::none());
      return;
    case Role::kAsync:
    case Role::kUnassigned:
    case Role::kUnknown:
      break;
  }
  // A new standby cluster's first leader with no data directory copies it from the source
  // peer its agent chose: none chosen yet, it waits for the source's state (0083 "Phase 7
  // as built"; any other leader runs with no source peer chosen).
  const PgConfig wanted = desiredPgConfig();
  if (role_ == Role::kStandbyLeader && wanted.newCluster && wanted.source && wanted.source->kind == SourceKind::kDugong &&
      !wanted.source->peer && !pgSetUp_ && !(pgApplied_ && pgApplied_->role == PgRole::kStandbyLeader)) {
    return blocked("the first standby leader of " + s.standby->source.describe() + ", with no data directory: waiting "
                   "to read the source's state to choose the peer to copy it from",
                   false);
  }
  // Postgres follows the state as it is now; a write in flight changes it only once
  // confirmed (a takeover promotes postgres after its new generation is written). A
  // takeover in progress keeps its fence; an abandoned one is lifted here, once a quorum
  // member's report is withdrawn.
  if (!keepFence_ && !reportHoldsFence()) applyPg(wanted);
}

void Peer::evaluateSync() {
  const ClusterState& s = *state_;
  if (s.quorum) return evaluateMember();
  std::string why;
  if (!isActive(s.primary.id)) {
    why = "primary " + s.primary.id + " is gone";
  } else if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, now_);
    if (!req) {
      blocked("ignoring promote request: " + req.error(), false);
      return;
    }
    if (req->role != "sync") return;
    why = "promote request for this sync (" + (s.standby ? "standby leader " + s.primary.id + " becomes an async"
                                                        : "deposing " + s.primary.id) + ")";
  } else {
    return;
  }
  if (s.frozen()) return blocked(why + ", but the cluster is frozen: no takeover", true);
  if (opts_.self.tags.nofailover) return blocked(why + ", but this peer is tagged nofailover: it never takes over", false);
  if (!withSyncFirst(presentAsyncs())) return blocked(why + ", but " + noSyncCandidate(), true);
  if (!pgReady()) return blocked(why + ", but postgres is not online as sync", true);
  // Catch-up is checked before fencing (a fenced standby stops receiving), and again
  // after it, with the position that becomes initWal.
  const bool fenced = fence_ == Fence::kFenced && fencedFor_.empty();
  auto wal = fenced ? fencedWal(why, std::nullopt) : walForTakeover(why);
  if (!wal) return;
  if (*wal < s.initWal) {
    keepFence_ = false;
    return blocked(why + ", but this peer has not caught up: its WAL " + wal->toString() + " is behind initWal " +
                       s.initWal.toString(),
                   true);
  }
  if (auto other = offTheGenerationsHistory()) {
    keepFence_ = false;
    return blocked(why + ", but " + *other, true);
  }
  if (!fenced) {
    fencedWal(why, std::nullopt);
    return;
  }
  if (s.standby) {
    ClusterState next = standbyTakeover(*wal);
    return writeState(next, "generation " + std::to_string(next.generation) + ": " + why + "; " + opts_.self.id +
                                " takes over as standby leader with WAL " + wal->toString() + ", " + next.sync->id +
                                " becomes sync, " + s.primary.id + " is not deposed (a standby leader wrote nothing)" +
                                passedOver(presentAsyncs(), *withSyncFirst(presentAsyncs())));
  }
  ClusterState next = syncTakeover(*wal);
  historyCheck_ = next.initTimeline != 0 ? next.generation : 0;
  writeState(next, "generation " + std::to_string(next.generation) + ": " + why + "; " + opts_.self.id +
                       " takes over as primary with WAL " + wal->toString() + ", " + next.sync->id +
                       " becomes sync, " + s.primary.id + " is deposed" +
                       passedOver(presentAsyncs(), *withSyncFirst(presentAsyncs())));
}

Role Peer::roleFromState(const ClusterState& s) const {
  if (isSelf(s.primary)) return s.standby ? Role::kStandbyLeader : Role::kPrimary;
  if (s.oneNodeWriteMode) return Role::kUnassigned;
  if (s.sync && isSelf(*s.sync)) return Role::kSync;
  if (s.quorum && containsPeer(s.quorum->members, opts_.self.id)) return Role::kSync;  // a member
  if (containsPeer(s.deposed, opts_.self.id)) return Role::kDeposed;
  if (containsPeer(s.async, opts_.self.id)) return Role::kAsync;
  return Role::kUnassigned;
}

namespace {
// The generation a demote-cluster began (0083 5.2): its initWal is where the old primary's
// WAL ended (`demotedAt`).
bool demotionGeneration(const ClusterState& s) {
  return s.standby && s.standby->demotedAt && s.standby->demotedAt->wal == s.initWal;
}
}  // namespace

PgConfig Peer::desiredPgConfig() const {
  const ClusterState& s = *state_;
  switch (role_) {
    case Role::kPrimary: {
      if (demoting()) return PgConfig::none();  // demote-cluster: down before the standby state (0083 5.2)
      // Only a new cluster's first primary may create its data directory: in any later
      // generation, or one set up from data (initWal), it holds the cluster's data, and
      // the generation's history up to initWal.
      // In quorum mode commits wait for k of the members, never for none.
      PgConfig c = s.generation == 1 && s.initWal == WalPosition() ? PgConfig::firstPrimary(s.sync)
                                                                    : PgConfig::primary(s.sync);
      c.quorum = s.quorum;
      if (c.newCluster) return c;
      c.initWal = s.initWal;
      c.initTimeline = s.initTimeline;
      return c;
    }
    case Role::kStandbyLeader: {
      // Only a new standby cluster's first leader makes its data directory (from the source).
      PgConfig c = PgConfig::standbyLeader(standbyEndpoint(), s.generation == 1 && s.initWal == WalPosition());
      // The generation a demotion began (0083 5.2): its data directory last ran as this
      // site's primary, and is rewound from the source if it diverged.
      c.demoted = demotionGeneration(s);
      return c;
    }
    case Role::kSync: {
      PgConfig c = PgConfig::standby(PgRole::kSync, s.primary, s.primary);
      c.repairAtOnce = demotionGeneration(s);  // its WAL forked with the old primary's
      return c;
    }
    case Role::kAsync: {
      int i = indexOfPeer(s.async, opts_.self.id);
      // In quorum mode the chain hangs from the first member.
      const PeerIdentity& upstream = i > 0   ? s.async[static_cast<size_t>(i - 1)]
                                     : s.quorum ? s.quorum->members.front()
                                                : *s.sync;
      PgConfig c = PgConfig::standby(PgRole::kAsync, upstream, s.primary);
      c.repairAtOnce = demotionGeneration(s);
      return c;
    }
    case Role::kUnassigned:
    case Role::kDeposed:
    case Role::kUnknown:
      break;
  }
  return PgConfig::none();
}

void Peer::applyPg(const PgConfig& desired) {
  if (pgApplying_ || timers_.count(TimerId::kRetryPgApply)) return;  // evaluated again when done
  if (pgApplied_ && *pgApplied_ == desired && fence_ == Fence::kNone) return;
  pgApplying_ = desired;
  // A reconfiguration lifts a fence (a standby streams again): from now on the fence no
  // longer holds, whatever the apply's outcome: a takeover begun while the apply that
  // abandoned an earlier one is in flight must fence again, not use that fence.
  if (fence_ == Fence::kFenced) fence_ = Fence::kDirty;
  std::string what = std::string("configuring postgres as ") + pgRoleName(desired.role);
  if (desired.upstream) what += ", streaming from " + desired.upstream->id;
  if (desired.source) what += ", following the source " + desired.source->describe();
  if (desired.source && desired.source->kind == SourceKind::kDugong && !desired.source->peer) {
    what += " (no state of the source read yet to choose its peer: the one it followed last as its standby leader, "
            "else none: in recovery, replaying what it has)";
  }
  if (desired.role == PgRole::kPrimary) {
    what += desired.downstream ? ", synchronous standby " + desired.downstream->id : ", writable alone";
  }
  log(LogLevel::kInfo, what);
  out_->push_back(ApplyPgConfig{desired});
}

// ---- new generations ------------------------------------------------------------

ClusterState Peer::nextGeneration(WalPosition wal) const {
  ClusterState next = *state_;
  next.generation += 1;
  next.primary = opts_.self;
  next.initWal = wal;
  next.initTimeline = freshHistory_ ? freshHistory_->timelineAt(wal) : 0;
  next.freeze = nullptr;
  next.promote = nullptr;
  if (next.standby) next.standby->promote = nullptr;
  next.oneNodeWriteMode = false;
  return next;
}

// Why this peer's WAL (just read) does not hold the current generation's history up to
// initWal, if it does not. A position alone does not say: a peer rebuilt from an earlier
// primary holds that primary's unacknowledged WAL past the point where the generation
// forked off, and may reach initWal without what the generation's primary acknowledged
// before it. Postgres tells histories apart by timeline.
std::optional<std::string> Peer::offTheGenerationsHistory() const {
  const ClusterState& s = *state_;
  if (s.initTimeline == 0) return std::nullopt;  // not recorded: positions decide
  const std::string gen = "generation " + std::to_string(s.generation);
  if (!freshHistory_) {
    return "the timelines of its WAL are not known, and " + gen + " began on timeline " +
           std::to_string(s.initTimeline) + ": no takeover without them";
  }
  const int64_t mine = freshHistory_->timelineAt(s.initWal);
  if (mine == s.initTimeline) return std::nullopt;
  return "its WAL is on timeline " + std::to_string(mine) + " at initWal " + s.initWal.toString() + ", the " +
         "generation's is on timeline " + std::to_string(s.initTimeline) + " (its WAL: " + freshHistory_->describe() +
         "): it holds WAL that " + gen + " never had, and lacks some of what it acknowledged (dugong-adm rebuild "
         "makes it follow again)";
}

ClusterState Peer::syncTakeover(WalPosition wal) const {
  // As the primary's takeover, and the old primary is deposed.
  ClusterState next = primaryTakeover(wal);
  next.deposed.push_back(state_->primary);
  return next;
}

std::optional<WalPosition> Peer::walForTakeover(const std::string& why) {
  if (freshWal_) return freshWal_;
  if (holdUpdates_) return std::nullopt;
  update_ = Update::kReadingWal;
  updateReason_ = why;
  log(LogLevel::kDebug, "reading the WAL position: " + why);
  out_->push_back(ReadWal{});
  return std::nullopt;
}

std::optional<WalPosition> Peer::fencedWal(const std::string& why, const std::optional<PeerIdentity>& newSync) {
  keepFence_ = true;
  const std::string target = newSync ? newSync->id : "";
  if (fence_ == Fence::kFenced && fencedFor_ == target) return walForTakeover(why);
  if (pgApplying_ || holdUpdates_ || timers_.count(TimerId::kRetryPgApply)) return std::nullopt;
  update_ = Update::kFencing;
  updateReason_ = why;
  fencedFor_ = target;
  const bool alsoSync = newSync && state_ && state_->sync && state_->sync->id != newSync->id;
  log(LogLevel::kInfo, "fencing postgres before reading initWal (" + why + "): " +
                           (!newSync   ? std::string("no longer streaming")
                            : alsoSync ? "commits now wait for both " + newSync->id + " and " + state_->sync->id +
                                             " until the new generation is written"
                                       : "commits now wait for " + newSync->id));
  out_->push_back(FencePg{newSync});
  return std::nullopt;
}

void Peer::writeState(ClusterState next, const std::string& reason, std::vector<ElectionNodeCheck> checks) {
  if (holdUpdates_) {
    blocked("waiting to retry a failed cluster-state write: " + reason, false);
    return;
  }
  update_ = Update::kWriting;
  updateReason_ = reason;
  lastBlocked_.clear();
  log(LogLevel::kInfo, "writing the cluster state: " + reason);
  out_->push_back(WriteClusterState{next, state_ ? stateVersion_ : -1, reason, std::move(checks)});
  writing_ = std::move(next);
}

void Peer::settleUnknownWrite() {
  if (update_ != Update::kNone) return;
  writeState(*state_, "settling a takeover write of unknown outcome: writing back the state as read (version " +
                          std::to_string(*unsettledWrite_) +
                          ") so that the takeover's write, if it has not landed, can no longer land; postgres keeps "
                          "its fence until then");
}

void Peer::blocked(const std::string& why, bool retry) {
  if (why != lastBlocked_) {
    log(LogLevel::kInfo, why);
    lastBlocked_ = why;
  }
  if (retry) retryLater();
}

void Peer::retryLater() { startTimer(TimerId::kRetryEvaluation, opts_.retryDelayMs); }

void Peer::startTimer(TimerId id, int64_t delayMs) {
  if (!timers_.insert(id).second) return;
  out_->push_back(StartTimer{id, delayMs});
}

void Peer::log(LogLevel level, std::string message) { out_->push_back(LogDecision{level, std::move(message)}); }

bool Peer::pgReady() const { return pgOnline_ && pgApplied_ && *pgApplied_ == desiredPgConfig(); }

bool Peer::isActive(const std::string& id) const { return active_ && containsPeer(*active_, id); }

PeerList Peer::presentAsyncs() const {
  PeerList out;
  for (const auto& a : state_->async) {
    if (isActive(a.id)) out.push_back(a);
  }
  return out;
}

bool Peer::maySync(const PeerIdentity& p) const {
  const int i = active_ ? indexOfPeer(*active_, p.id) : -1;
  return !(i >= 0 ? (*active_)[static_cast<size_t>(i)] : p).tags.nofailover;
}

std::optional<PeerList> Peer::withSyncFirst(const PeerList& peers) const {
  auto it = std::find_if(peers.begin(), peers.end(), [this](const PeerIdentity& p) { return maySync(p) && streams(p); });
  if (it == peers.end()) it = std::find_if(peers.begin(), peers.end(), [this](const PeerIdentity& p) { return maySync(p); });
  if (it == peers.end()) return std::nullopt;
  PeerList order{*it};
  for (const auto& p : peers) {
    if (p.id != it->id) order.push_back(p);
  }
  return order;
}

std::string Peer::passedOver(const PeerList& peers, const PeerList& order) const {
  PeerList skipped;
  for (const auto& p : peers) {
    if (p.id == order.front().id) break;
    if (maySync(p)) skipped.push_back(p);
  }
  if (skipped.empty()) return "";
  return ", passing over " + peerIds(skipped) + (skipped.size() == 1 ? ", which does" : ", which do") +
         " not stream from its upstream";
}

std::string Peer::noSyncCandidate() const {
  const PeerList present = presentAsyncs();
  if (present.empty()) return "no async is present to become the new sync";
  return "every present async " + peerIdList(present) + " is tagged nofailover: none becomes the new sync";
}

std::string Peer::describe(const ClusterState& s) const {
  const std::string sync = s.quorum ? ", quorum ANY " + std::to_string(s.quorum->k) + " " + peerIdList(s.quorum->members)
                                    : ", sync " + (s.sync ? s.sync->id : std::string("none"));
  return "generation " + std::to_string(s.generation) + ", primary " + s.primary.id + sync + ", async " +
         peerIdList(s.async);
}

nlohmann::json Peer::inspect() const {
  auto cfg = [](const std::optional<PgConfig>& c) { return c ? c->toJson() : nlohmann::json(nullptr); };
  nlohmann::json active = nullptr;
  if (active_) {
    active = nlohmann::json::array();
    for (const auto& p : *active_) active.push_back(p.id);
  }
  nlohmann::json pending = nlohmann::json::array();
  if (update_ == Update::kWriting) pending.push_back("cluster-state write: " + updateReason_);
  if (update_ == Update::kReadingWal) pending.push_back("WAL read: " + updateReason_);
  if (update_ == Update::kFencing) pending.push_back("postgres fence: " + updateReason_);
  if (pgApplying_) pending.push_back(std::string("postgres transition to ") + pgRoleName(pgApplying_->role));
  for (TimerId t : timers_) pending.push_back(std::string("timer ") + timerName(t));
  nlohmann::json j = {
      {"id", opts_.self.id},
      {"role", roleName(role_)},
      {"singleton", opts_.singleton},
      {"clusterState", state_ ? state_->toJson() : nlohmann::json(nullptr)},
      {"stateVersion", stateVersion_},
      {"activePeers", active},
      {"pg",
       {{"initialized", pgInitialized_},
        {"online", pgOnline_},
        {"setUp", pgSetUp_},
        {"applied", cfg(pgApplied_)},
        {"applying", cfg(pgApplying_)}}},
      {"pending", pending},
  };
  if (auto why = haltReason()) j["halted"] = *why;
  if (sourceUpstream_) j["sourceUpstream"] = sourceUpstream_->toJson();
  if (sourceSeen_) j["sourceSeen"] = describeEvent(*sourceSeen_);
  if (stalledSync_) j["syncAcknowledgesNothing"] = {{"sync", stalledSync_->syncId}, {"detail", stalledSync_->detail}};
  if (opts_.quorum) j["quorum"] = inspectQuorum();
  if (state_ && state_->standby) j["standby"] = {{"source", state_->standby->source.describe()}};
  if (opts_.setupFromData && !state_) {
    nlohmann::json data = nlohmann::json::object();
    for (const auto& [id, d] : dataStates_) data[id] = d.toJson();
    j["setup"] = {{"dataStates", data}, {"waiting", lastBlocked_}};
  }
  return j;
}

}  // namespace dugong
