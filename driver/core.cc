// The driver's core (driver/core.h): the loop around the state machine, its actions,
// and postgres transitions one at a time.
#include "driver/core.h"

#include <algorithm>
#include <utility>

#include "statemachine/overloaded.h"

namespace dugong::driver {

Core::Core(DriverOptions options, bool peersReachable)
    : opts_(std::move(options)),
      peersReachable_(peersReachable),
      peer_(std::make_unique<Peer>(peerOptions())),
      syncWatch_(opts_.syncReplaceAfterMs, opts_.syncConnectGraceMs) {}

Core::~Core() = default;

PeerOptions Core::peerOptions() const {
  PeerOptions o{opts_.identity, opts_.singleton, opts_.retryDelayMs};
  o.setupFromData = opts_.setupFromData;
  o.setupWaitMs = opts_.setupWaitMs;
  o.syncReplaceHoldMs = opts_.syncReplaceHoldMs;
  o.quorum = opts_.quorum;
  o.standbySource = opts_.standbySource;
  return o;
}

std::vector<Command> Core::step(const Moment& now, const Input& input) {
  std::vector<Command> out;
  step(now, input, out);
  return out;
}

void Core::step(const Moment& now, const Input& input, std::vector<Command>& out) {
  now_ = now;
  out_.clear();
  out.clear();
  out_.swap(out);  // the commands are emitted into the caller's buffer
  // Nothing is stepped once the driver stops (a request for a promise is still answered).
  if (!stopping_ || std::holds_alternative<in::FailsafeAsked>(input)) onInput(input);
  out_.swap(out);  // out_ is left empty, as it was
}

void Core::onInput(const Input& input) {
  std::visit(Overloaded{
                 [&](const in::Start&) { start(); },
                 [&](const in::Stop&) { stop(); },
                 [&](const in::Delivered& d) { step(d.event); },
                 // A withdrawn peer has no session: news of the one it left (posted
                 // before it left, or stepped late by an agent that was stopped) says
                 // nothing of the session it joins with again.
                 [&](const in::Connection& c) {
                   if (!health_.withdrawn()) onConnection(c.c);
                 },
                 [&](const in::Lease& l) {
                   if (!health_.withdrawn()) onLease(l.l);
                 },
                 [&](const in::JoinRefused& j) { carryOut(Fatal{"cannot join the coordinator: " + j.error}); },
                 [&](const in::Initialized& i) {
                   if (!i.afterRebuild) {
                     log(LogLevel::kInfo, std::string("postgres found ") + (i.e.online ? "running" : "stopped") +
                                              " and " + (i.e.setUp ? "set up before" : "never set up"));
                   }
                   step(i.e);
                 },
                 [&](const in::Applied& a) { onApplied(a); },
                 [&](const in::Fenced& f) { onFenced(f.r); },
                 [&](const in::WalRead& w) { step(w.r); },
                 [&](const in::DataStateRead& d) { onDataStateRead(d.r); },
                 [&](const in::WritesStopped& w) { onWritesStopped(w.r); },
                 [&](const in::ShutDown& s) { onShutDown(s.r); },
                 [&](const in::WritesResumed& w) { onWritesResumed(w.noTakeoverCanLand, w.r); },
                 [&](const in::UpstreamStopped& u) { onUpstreamStopped(u); },
                 [&](const in::Rejoined& r) { onRejoined(r.primary, r.r); },
                 [&](const in::Health& h) { onHealth(h.healthy, h.detail); },
                 [&](const in::SyncSampled& s) { onSyncSampled(s); },
                 [&](const in::MembersSampled& s) { onMembersSampled(s); },
                 [&](const in::StateWritten& w) {
                   switch (w.purpose) {
                     case in::WriteFor::kStateMachine:
                       return onStateMachineWrite(w.r);
                     case in::WriteFor::kConfirmation:
                       return onConfirmation(w.version, w.r);
                     case in::WriteFor::kRelease:
                       return onReleased(w.r);
                   }
                 },
                 [&](const in::ReportPublished& r) { onReportPublished(r.r); },
                 [&](const in::FailsafeAnswered& a) { onFailsafeAnswer(a); },
                 [&](const in::FailsafeAsked& a) {
                   FailsafeAnswer answer = answerFailsafe(a.request);
                   // A promise given is recorded until its end; a release, as ended now.
                   std::optional<int64_t> record;
                   if (answer.granted && opts_.recordPromise) record = a.request.release ? now() : failsafe_.promisedUntil();
                   emit(cmd::AnswerFailsafe{std::move(answer), record});
                 },
                 [&](const in::Timer& t) {
                   // A timer cancelled or started again since: not this start's.
                   if (!disarm(t.key)) return;
                   onTimer(t.key);
                 },
             },
             input);
}

void Core::setTimer(TimerKind kind, int64_t delayMs) {
  arm(TimerKey{kind}, now() + delayMs);
  emit(cmd::SetTimer{TimerKey{kind}, delayMs});
}

void Core::cancelTimer(TimerKind kind) {
  if (disarm(TimerKey{kind})) emit(cmd::CancelTimer{TimerKey{kind}});
}

namespace {
// Where `key` is, or would go, in the sorted armed_.
auto firstNotBefore(std::vector<std::pair<TimerKey, int64_t>>& armed, const TimerKey& key) {
  return std::lower_bound(armed.begin(), armed.end(), key,
                          [](const std::pair<TimerKey, int64_t>& a, const TimerKey& k) { return a.first < k; });
}
}  // namespace

void Core::arm(const TimerKey& key, int64_t at) {
  auto it = firstNotBefore(armed_, key);
  if (it != armed_.end() && it->first == key) {
    it->second = at;
  } else {
    armed_.insert(it, {key, at});
  }
}

bool Core::disarm(const TimerKey& key) {
  auto it = firstNotBefore(armed_, key);
  if (it == armed_.end() || it->first != key) return false;
  armed_.erase(it);
  return true;
}

void Core::onTimer(const TimerKey& key) {
  switch (key.kind) {
    case TimerKind::kStateMachine:
      return step(TimerFired{key.id});
    case TimerKind::kHealth:
      return healthTick();
    case TimerKind::kWithdrawal:
      return onWithdrawalOver();
    case TimerKind::kWrites:
      return onWritesTimer();
    case TimerKind::kShutDown:
      return onShutDownTimer();
    case TimerKind::kLease:
      return leaseEnding();
    case TimerKind::kLeaseShut:
      return onLeaseShutTimer();
    case TimerKind::kFailsafe:
      return askFailsafe();
    case TimerKind::kHeldTakeover:
      return onHeldTakeoverTimer();
    case TimerKind::kPeerGrace:
      return endPeerGrace();
    case TimerKind::kRejoin:
      return onRejoinTimer();
    case TimerKind::kHandover:
      return onHandoverTimer();
    case TimerKind::kDataState:
      return maybePublishDataState();
    case TimerKind::kSyncWatch:
      return syncWatchTick();
    case TimerKind::kStreamWatch:
      return streamWatchTick();
  }
}

void Core::start() {
  emit(cmd::InitPostgres{});
  emit(cmd::StartHealthCheck{});
  holdEarlierPromise();
  join();
  startSyncWatch();
  streamWatchTick();
}

void Core::join() {
  ++counters_.joins;
  emit(cmd::Join{});
}

void Core::stop() {
  stopping_ = true;
  log(LogLevel::kInfo, std::string("stopping: ") +
                           (opts_.keepMembershipOnStop
                                ? "keeping the ZooKeeper session for a restart (peers see no change if this agent is "
                                  "back within the session timeout)"
                                : "leaving ZooKeeper") +
                           (opts_.stopPostgresOnExit ? " and stopping postgres" : ""));
  for (const auto& [key, at] : armed_) emit(cmd::CancelTimer{key});
  armed_.clear();
  emit(cmd::Leave{opts_.keepMembershipOnStop});
  emit(cmd::StopHealthCheck{});
  if (opts_.stopPostgresOnExit) {
    emit(cmd::StopPostgresAndFinish{});
  } else {
    emit(cmd::Finish{});
  }
}

// ---- the state machine's loop ------------------------------------------------------

void Core::step(const Event& delivered) {
  bool newSessionAfterLoss = false;
  bool waitDropped = false;
  if (std::holds_alternative<ZkInitialized>(delivered) || std::holds_alternative<ClusterStateChanged>(delivered)) {
    stateWriteUnsettled_ = false;  // the state read says how any earlier write ended
  }
  // The state machine steps the answer to its write now: that write is over (a write it
  // asks for in this step is a new one).
  if (std::holds_alternative<StateWriteFinished>(delivered) && stateWrite_ &&
      stateWrite_->purpose == in::WriteFor::kStateMachine && stateWrite_->answered) {
    stateWrite_.reset();
  }
  if (const auto* init = std::get_if<ZkInitialized>(&delivered)) {
    waitDropped = leaveTheOldSession();
    noteStateRead(init->state);
    coord_.active = init->active;
    coord_.data = init->data;
    coord_.notStreaming = init->notStreaming;
    coord_.reports = init->reports;
    // The new session's lease comes with it (a new session id): its creation was a
    // leader's transaction.
    coord_.connected = true;
    newSessionAfterLoss = enterTheNewSession();
  } else if (const auto* change = std::get_if<ClusterStateChanged>(&delivered)) {
    noteStateRead(change->state);
  } else if (const auto* active = std::get_if<ActivePeersChanged>(&delivered)) {
    coord_.active = active->active;
    coord_.data = active->data;
    coord_.notStreaming = active->notStreaming;
    coord_.reports = active->reports;
  }
  const std::optional<Event> keeping = keepingPeersFromBeforeTheLoss(delivered);
  const Event& event = keeping ? *keeping : delivered;
  if (std::holds_alternative<ClusterStateChanged>(event) || std::holds_alternative<ZkInitialized>(event)) {
    // The event being stepped now delivers the state; the active list comes first.
    if (rebuiltWhileDeposed()) startFreshStateMachine(std::holds_alternative<ClusterStateChanged>(event));
  }
  if (newSessionAfterLoss) shutDownAsTheLostSessionExpired();
  for (Action& a : peer_->step(now_.wallMs, event)) carryOut(std::move(a));
  if (failsafe_.permittedUntil() && (peer_->role() != Role::kPrimary || generation() != failsafe_.generation())) {
    dropFailsafe("this peer is no longer the primary of generation " + std::to_string(failsafe_.generation()));
  }
  if (newSessionAfterLoss || waitDropped) afterNewSession();
  releaseFailsafeOnceRequested();
  maybeHandOver();
  joinAgainOnceDeposedAndStopped();
  maybeRejoin();
  maybePublishDataState();
  reconcileWrites();
}

void Core::carryOut(Action action) {
  std::visit(
      Overloaded{
          [&](WriteClusterState& w) {
            ++counters_.stateWrites;
            if (health_.withdrawn()) {
              ++counters_.stateWriteFailures;
              return later(StateWriteFinished{false, "not connected to ZooKeeper (withdrawn): not sent", false, -1, true});
            }
            if (stateWrite_ && stateWrite_->purpose != in::WriteFor::kStateMachine) {
              ++counters_.stateWriteFailures;
              return later(StateWriteFinished{
                  false,
                  stateWrite_->purpose == in::WriteFor::kConfirmation
                      ? "a test-and-set confirming the state after a new session is in flight"
                      : "a test-and-set taking this peer out of deposed after its rejoin is in flight",
                  false, -1, true});
            }
            if (holdTakeoverForPromise(action)) return;
            // A write may name another sync, which promised nothing: the failsafe's
            // permission does not outlive it.
            if (failsafe_.permittedUntil()) dropFailsafe("this peer writes the cluster state (" + w.reason + ")");
            stateWrite_ = StateWrite{in::WriteFor::kStateMachine};
            emit(cmd::PutState{std::move(w.state), w.expectedVersion, std::move(w.reason),
                               in::WriteFor::kStateMachine, std::move(w.checks)});
          },
          [&](const ApplyPgConfig& a) {
            // A primary out of ZooKeeper keeps postgres down (see withdraw()): the state
            // machine's retry of an apply that failed around the withdrawal is refused,
            // and it tries again once the peer has joined again.
            if (health_.withdrawn() && a.config.role == PgRole::kPrimary) {
              return later(PgConfigApplied{false, "withdrawn from ZooKeeper: postgres stays down until this peer "
                                                  "has joined again",
                                           false});
            }
            applyPg(a.config, PgOp::kPeerApply);
          },
          [&](const FencePg& f) {
            // The state machine fences only with no transition of its own in flight; a
            // restart after a crash may be: the fence then fails and is retried.
            if (pgBusy()) return later(PgFenced{false, "postgres is being restarted", 0});
            // A quorum membership step's fence (reload, verify, catch up), bounded as a
            // sync's stall is: a member of the new rule that does not catch up within
            // sync.replaceAfterMs (its default when 0, "never replace") fails it, and the
            // state machine applies the state's rule again (docs/decisions/0079 5.2).
            if (f.quorum) {
              pg_.op = PgOp::kFence;
              const int64_t bound =
                  opts_.syncReplaceAfterMs > 0 ? opts_.syncReplaceAfterMs : defaults::kSyncReplaceAfterMs;
              return emit(cmd::FencePg{std::nullopt, f.quorum, f.endWalsenders, bound});
            }
            // A switchover waits for the old primary's stop first: a promise holds its
            // fence only if the stream did not end (onUpstreamStopped).
            if (awaitOldPrimaryStop(f.newSync)) return;
            if (holdTakeoverForPromise(action)) return;
            return fencePg(f.newSync);
          },
          [&](const ReadWal&) { emit(cmd::ReadWal{}); },
          [&](PublishReport& p) {
            if (holdTakeoverForPromise(action)) return;
            publishReport(std::move(p.report));
          },
          [&](const StartTimer& t) {
            const TimerKey key{TimerKind::kStateMachine, t.id};
            arm(key, now() + t.delayMs);
            emit(cmd::SetTimer{key, t.delayMs});
          },
          [&](const LogDecision& d) {
            ++counters_.decisions;
            log(d.level, d.message);
          },
          [&](const Fatal& f) {
            log(LogLevel::kError, "fatal: " + f.reason);
            failed_ = true;
            emit(cmd::Fatal{f.reason});
          },
      },
      action);
}

void Core::onStateMachineWrite(const StateWriteFinished& r) {
  // Over once the state machine has stepped the answer (step(Event)).
  if (stateWrite_ && stateWrite_->purpose == in::WriteFor::kStateMachine) stateWrite_->answered = true;
  if (!r.ok) ++counters_.stateWriteFailures;
  if (!r.ok) stateWriteUnsettled_ = true;
  later(r);
}

void Core::noteStateRead(const StateNode& node) {
  coord_.state.node = node;
  coord_.state.parsed.reset();
  if (!node.exists) return;
  const auto formats = opts_.quorum ? ClusterState::Formats::kAll : ClusterState::Formats::kSyncAndStandby;
  if (auto parsed = ClusterState::parse(node.data, formats)) coord_.state.parsed = std::move(parsed.value());
}

bool Core::stateWriteUnanswered(in::WriteFor purpose) const {
  return stateWrite_ && stateWrite_->purpose == purpose && !stateWrite_->answered;
}

bool Core::logOnce(Memo memo, const std::string& value) {
  auto [it, added] = memos_.try_emplace(memo, value);
  if (added) return true;
  if (it->second == value) return false;
  it->second = value;
  return true;
}

std::optional<int64_t> Core::generation() const {
  if (!peer_->clusterState()) return std::nullopt;
  return peer_->clusterState()->generation;
}

// ---- postgres ------------------------------------------------------------------------

void Core::fencePg(const std::optional<PeerIdentity>& newSync) {
  pg_.op = PgOp::kFence;
  emit(cmd::FencePg{newSync});
}

void Core::onFenced(const PgFenced& r) {
  pg_.op.reset();
  step(r);
  afterPgTransition();  // like every other transition's end: what waited for it runs now
}

void Core::applyPg(const PgConfig& config, PgOp op) {
  const bool fromPeer = op == PgOp::kPeerApply;
  if (pgBusy()) {
    // Only a restart can be in flight when the state machine asks (it never asks twice).
    if (fromPeer) pg_.queuedPeerApply = config;
    return;
  }
  pg_.op = op;
  if (config.role == PgRole::kPrimary) emit(cmd::PrimaryApplyStarting{});
  emit(cmd::ApplyPg{config, fromPeer});
}

void Core::onApplied(const in::Applied& a) {
  const PgConfig& config = a.config;
  const bool fromPeer = a.fromPeer;
  const PgConfigApplied& r = a.r;
  // The state machine's wanted configuration: its own apply, or the start after a
  // switchover that did not happen.
  const bool wanted = fromPeer || pg_.op == PgOp::kStartAgain;
  pg_.op.reset();
  pg_.lastTransitionDone = now();
  bool restartAfterResume = false;
  if (r.ok) {
    pg_.lastApplied = config;
    ++counters_.transitions;
    restartAfterResume = writesAfterApply(config, wanted);
    // After the above: whether postgres is expected online may have changed, and an
    // unhealthy report heard while it was not (a crash since is no change for the health
    // check) starts the clock.
    noteUnhealthy();
  } else {
    ++counters_.transitionFailures;
    if (!fromPeer) {
      log(LogLevel::kWarn, "restarting postgres failed: " + r.error);
      noteUnhealthy();  // the health check restarts it again
    }
  }
  // The role is applied once postgres runs its configuration: not on an apply the state
  // machine made on the way to it (a new primary's role none first).
  if (r.ok && fromPeer && peer_->role() != pg_.roleApplied && peer_->wantedPgConfig() == config) {
    const Role previous = std::exchange(pg_.roleApplied, peer_->role());
    emit(cmd::RoleApplied{previous, pg_.roleApplied});
  }
  if (fromPeer) step(r);
  if (restartAfterResume && !pgBusy() && !lastAppliedIsStale()) applyPg(*pg_.lastApplied);
  afterPgTransition();
}

bool Core::expectPostgresOnline() const {
  return pg_.lastApplied && pg_.lastApplied->role != PgRole::kNone && !isolation_.postgresShutDown();
}

// A restart re-applies the last configuration, and only while the state machine still
// wants it: one it has moved away from (a sync that took over and whose promotion failed)
// would make postgres follow a deposed primary again. The state machine applies its own
// configuration (its retry after the failed apply starts postgres).
// Nor while the state machine is in the middle of a step (a takeover between its fence
// and its state write): re-applying the configuration from before the fence would undo
// it; postgres starts once the step is over, if still wanted.
// Nor while a takeover's state write failed and may have landed (Peer::keepsFence): a
// primary's fence makes commits wait for the new sync and the current one, a sync's stops
// its streaming from the old primary, and a restart would undo either. Postgres then
// starts once the state says whether it landed (a withdrawn peer joins again to read it:
// see withdraw()).
bool Core::lastAppliedIsStale() const {
  return !pg_.lastApplied || !(peer_->wantedPgConfig() == *pg_.lastApplied) || peer_->awaitingCompletion() ||
         peer_->keepsFence();
}

// A postgres transition ended: what waited for it.
void Core::afterPgTransition() {
  if (rebuiltWhileDeposed()) startFreshStateMachine(true);
  // An abandoned switchover starts postgres again first: a resumption decided on the
  // handover's stop (role none) would find the configuration stale and leave writes
  // stopped, which no apply lifts; decided when that start ends.
  if (handover_.handingOver() && isolation_.resumptionWaitsFor(Isolation::WritesWait::kTransition) &&
      !pg_.queuedPeerApply) {
    maybeHandOver();
  }
  reconcileWrites();
  if (pg_.queuedPeerApply && !pgBusy()) {
    PgConfig next = *pg_.queuedPeerApply;
    pg_.queuedPeerApply.reset();
    applyPg(next, PgOp::kPeerApply);
  }
  maybeHandOver();
  joinAgainOnceDeposedAndStopped();
  maybeRejoin();
  maybePublishDataState();
}

}  // namespace dugong::driver
