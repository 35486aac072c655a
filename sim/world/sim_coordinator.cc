#include "sim/world/sim_coordinator.h"

#include <algorithm>
#include <utility>

namespace dugong::simworld {

// ---------------------------------------------------------------- the ensemble

PeerList ZkEnsemble::activePeers() const {
  PeerList l;
  l.reserve(active_.size());
  for (const std::string& id : active_) l.push_back(hooks_.identityOf(id));
  return l;
}

std::set<std::string> ZkEnsemble::notStreaming() const {
  std::set<std::string> out;
  for (const ZkClient& c : clients_) {
    if (c.agent && c.session != 0 && sessionAlive(c.session) && c.agent->streaming_ == false &&
        std::find(active_.begin(), active_.end(), c.id) != active_.end()) {
      out.insert(c.id);
    }
  }
  return out;
}

TakeoverReports ZkEnsemble::reports() const {
  TakeoverReports out;
  election_.forEachFirst([&](const std::string& peer, uint64_t sid) {
    const Session& s = sessions_.at(sid);
    if (!s.report) return;
    TakeoverReport r = *s.report;
    r.nodeVersion = s.nodeVersion;
    out.emplace(peer, std::move(r));
  });
  return out;
}

bool ZkEnsemble::syncElectionNode(int n) {
  const ZkClient& c = look(n);
  auto it = sessions_.find(c.session);
  if (!c.agent || c.session == 0 || it == sessions_.end() || !it->second.alive) return false;
  Session& s = it->second;
  if (s.report == c.agent->report_ && s.streaming == c.agent->streaming_) return false;
  s.report = c.agent->report_;
  s.streaming = c.agent->streaming_;
  ++s.nodeVersion;
  if (s.report && hooks_.reportPublished) hooks_.reportPublished(n);
  if (s.report) {
    trace_.trace('Z', [&] {
      return c.id + " election node (version " + std::to_string(s.nodeVersion) + ") holds the report " +
             s.report->describe();
    });
  }
  return true;
}

std::string ZkEnsemble::failedCheck(const std::vector<ElectionNodeCheck>& checks) const {
  for (const ElectionNodeCheck& check : checks) {
    const uint64_t sid = election_.firstSessionOf(check.peerId);
    if (sid == 0) return "the election node of " + check.peerId + " is gone";
    if (sessions_.at(sid).nodeVersion != check.version) {
      return "the election node of " + check.peerId + " changed since its report was counted (version " +
             std::to_string(sessions_.at(sid).nodeVersion) + ", counted " + std::to_string(check.version) + ")";
    }
  }
  return "";
}

void ZkEnsemble::answerReport(int n, uint64_t serial, ReportPublished r) {
  if (!look(n).agent) return;
  SimCoordinator& a = *look(n).agent;
  if (a.reportSerial_ != serial || !a.pendingReport_) return;
  auto done = std::move(a.pendingReport_);
  a.pendingReport_ = nullptr;
  hooks_.deliver(n, r, [&] { done(r); });
}

void ZkEnsemble::agentStarts(int n) {
  ZkClient& c = client(n);
  c.session = 0;
  c.ready = false;
  c.connecting = false;
  c.lossReported = false;
}

void ZkEnsemble::agentStops(int n) {
  ZkClient& c = client(n);
  c.ready = false;
  c.connecting = false;
  if (c.session != 0) {
    // A session already cut off keeps the expiry it has: the server last heard of it then.
    if (sessionAlive(c.session) && sessions_.at(c.session).connected) disconnect(c.session, "its client is gone");
    c.session = 0;
  }
}

void ZkEnsemble::connect(int n, Run run) {
  ZkClient& c = client(n);
  if (!runs(n, run) || !c.agent->member_) return;
  if (c.partitioned || leaderless()) {  // cannot reach the ensemble (or no leader): keep trying
    q_.after(model_.retryConnectMs, [this, n, run] { connect(n, run); });
    return;
  }
  c.connecting = false;
  uint64_t sid = nextSession_++;
  sessions_[sid] = Session{n, true, true, 0, 0, c.agent->report_, c.agent->streaming_};
  c.session = sid;
  c.needResync = false;
  uint64_t seq = election_.join(sid, c.id);
  trace_.trace('Z', [&] {
    return c.id + " session " + std::to_string(sid) + " established, election node " + std::to_string(seq);
  });
  recomputeActive();
  c.ready = true;
  if (model_.leaseIntervalMs > 0) {
    // The session's creation is the leader's: it lives a timeout from now at least. The
    // client hears of it as it connects, before its setup's reads (ZkInitialized).
    schedule(n, [this, n, run, sid, createdAt = q_.now()] {
      const ZkClient& x = look(n);
      if (!runs(n, run) || x.session != sid || !x.agent->member_ || !x.agent->callbacks_.onLease) return;
      x.agent->callbacks_.onLease(driver::CoordinatorLease{createdAt, static_cast<int64_t>(sid),
                                                          model_.sessionTimeoutMs, model_.leaseIntervalMs});
    });
    q_.after(model_.leaseIntervalMs, [this, n, run, sid] { leaseLoop(n, run, sid); });
  }
  deliver(n, ZkInitialized{stateNode(), activePeers(), {}, false, notStreaming(), reports()});
}

// A `sync` sent every leaseIntervalMs while the session lives: answered, with its send
// time, only if it reached a leader that still knows the session, through a server that
// reaches that leader (not partitioned, not cut off), and only then.
void ZkEnsemble::leaseLoop(int n, Run run, uint64_t sid) {
  const ZkClient& c = look(n);
  if (!runs(n, run) || c.session != sid || !sessionAlive(sid)) return;
  q_.after(model_.leaseIntervalMs, [this, n, run, sid] { leaseLoop(n, run, sid); });
  if (c.partitioned || !c.ready || !c.agent->member_ || !c.agent->callbacks_.onLease) return;
  const int64_t sentAt = q_.now();
  q_.after(model_.toServer.draw(rng_), [this, n, run, sid, sentAt] {
    auto it = sessions_.find(sid);
    if (it == sessions_.end() || !it->second.alive || !it->second.connected || leaderless() || look(n).partitioned) {
      return;
    }
    q_.after(model_.fromServer.draw(rng_), [this, n, run, sid, sentAt] {
      schedule(n, [this, n, run, sid, sentAt] {
        const ZkClient& x = look(n);
        if (!runs(n, run) || x.session != sid || !sessionAlive(sid) || x.partitioned || !x.agent->member_ ||
            !x.agent->callbacks_.onLease) {
          return;
        }
        x.agent->callbacks_.onLease(driver::CoordinatorLease{sentAt, static_cast<int64_t>(sid), model_.sessionTimeoutMs,
                                                            model_.leaseIntervalMs});
      });
    });
  });
}

// The session's client stopped talking to ZooKeeper: unless it reconnects, the server
// expires the session after its timeout.
void ZkEnsemble::disconnect(uint64_t sid, const std::string& why, int64_t touchLagMs) {
  Session& s = sessions_.at(sid);
  s.connected = false;
  uint64_t d = ++s.disconnects;
  // No leader, no expiry: the new leader gives the session a fresh timeout (endElection).
  q_.after(std::max<int64_t>(model_.sessionTimeoutMs - touchLagMs, 0), [this, sid, d, why] {
    auto i = sessions_.find(sid);
    if (i != sessions_.end() && i->second.alive && !i->second.connected && i->second.disconnects == d &&
        !leaderless()) {
      expire(sid, why);
    }
  });
}

void ZkEnsemble::cutOffFollower(int n, int64_t giveUpMs) {
  const int64_t lag = rng_.between(0, model_.tickTimeMs / 2);
  partition(n, giveUpMs + model_.reconnect.draw(rng_), giveUpMs, lag);
}

void ZkEnsemble::leaderChange(int64_t electionMs) {
  trace_.trace('F', [&] { return "the ZooKeeper leader goes: an election for " + std::to_string(electionMs) + " ms"; });
  ++changes_;  // the leader, and the clients below
  noLeaderUntil_ = std::max(noLeaderUntil_, q_.now() + electionMs);
  std::vector<int> closed;
  for (size_t i = 0; i < clients_.size(); ++i) {
    const int n = static_cast<int>(i);
    ZkClient& c = clients_[i];
    if (c.partitioned || c.session == 0 || !sessionAlive(c.session) || !c.agent) continue;
    c.partitioned = true;  // reaches no server with a leader
    const uint64_t serial = ++c.partitionSerial;
    closed.push_back(n);
    const uint64_t sid = c.session;
    // The server closes the connection: the client says so at once.
    schedule(n, [this, n, serial, sid] {
      ZkClient& x = client(n);
      if (x.partitionSerial != serial || x.session != sid || !x.agent->member_ || !x.ready) return;
      x.lossReported = true;
      trace_.trace('Z', [&] { return x.id + " client: connection closed by the server"; });
      x.agent->callbacks_.onConnection(
          driver::CoordinatorConnection{false, static_cast<int64_t>(sid), model_.sessionTimeoutMs});
    });
  }
  q_.at(noLeaderUntil_, [this, closed] {
    if (leaderless()) return;  // a later election ends it
    endElection();
    for (int n : closed) {
      const uint64_t serial = look(n).partitionSerial;
      q_.after(model_.reconnect.draw(rng_), [this, n, serial] {
        if (look(n).partitionSerial == serial) heal(n);
      });
    }
  });
}

// The new leader refreshes every session: a fresh timeout for those whose client is away.
void ZkEnsemble::endElection() {
  trace_.trace('Z', [&] { return std::string("a new ZooKeeper leader: every session gets a fresh timeout"); });
  for (auto& [sid, s] : sessions_) {
    if (!s.alive || s.host < 0) continue;
    if (!s.connected || look(s.host).partitioned) disconnect(sid, "no heartbeat within the session timeout");
  }
}

void ZkEnsemble::expire(uint64_t sid, const std::string& why) {
  auto it = sessions_.find(sid);
  if (it == sessions_.end() || !it->second.alive) return;
  it->second.alive = false;
  int n = it->second.host;
  trace_.trace('Z', [&] { return look(n).id + " session " + std::to_string(sid) + " expired (" + why + ")"; });
  election_.leave(sid);
  recomputeActive();
  ZkClient& c = client(n);
  if (c.agent && c.session == sid) {
    c.ready = false;
    if (!c.partitioned) {  // the client hears of it at once and starts a new session
      const Run run = runOf(n);
      q_.after(model_.expiryNoticed.draw(rng_), [this, n, run, sid] {
        if (!runs(n, run) || look(n).session != sid) return;
        client(n).session = 0;
        client(n).connecting = true;
        q_.after(model_.reconnect.draw(rng_), [this, n, run] { connect(n, run); });
      });
    }
  }
}

void ZkEnsemble::closeSessionOf(int n) {
  ZkClient& c = client(n);
  if (c.session == 0) return;
  auto it = sessions_.find(c.session);
  if (it != sessions_.end() && it->second.alive) {
    it->second.alive = false;
    trace_.trace('Z', [&] { return c.id + " session " + std::to_string(c.session) + " closed"; });
    election_.leave(c.session);
    recomputeActive();
  }
  c.session = 0;
}

void ZkEnsemble::joinWithoutClient(const std::string& id) {
  uint64_t sid = nextSession_++;
  sessions_[sid] = Session{-1, true, true, 0, 0, std::nullopt, std::nullopt};
  withoutClient_[id].push_back(sid);
  election_.join(sid, id);
  recomputeActive();
}

void ZkEnsemble::leaveWithoutClient(const std::string& id) {
  for (uint64_t sid : withoutClient_[id]) {
    sessions_.at(sid).alive = false;
    election_.leave(sid);
  }
  withoutClient_.erase(id);
  recomputeActive();
}

void ZkEnsemble::recomputeActive() {
  std::vector<std::string> next = election_.active();
  if (next == active_) return;
  if (hooks_.activeChanged) hooks_.activeChanged(active_, next);
  active_ = std::move(next);
  trace_.trace('Z', [&] {
    std::string s = "active [";
    for (size_t i = 0; i < active_.size(); ++i) s += (i ? "," : "") + active_[i];
    return s + "]";
  });
  notifyAll(false);
}

// A template, not a Task parameter: a Task inside the queue's Task would not fit inline
// (a heap allocation for every notification).
template <class Fn>
void ZkEnsemble::schedule(int n, Fn fn) {
  ZkClient& c = client(n);
  int64_t delay = model_.delivery.draw(rng_);
  if (q_.now() < c.slowNotifyUntil) delay += c.slowNotifyMs;
  int64_t t = std::max(q_.now() + delay, c.nextDelivery);
  c.nextDelivery = t;
  q_.at(t, [this, n, run = runOf(n), fn = std::move(fn)]() mutable {
    if (runs(n, run)) fn();
  });
}

void ZkEnsemble::deliver(int n, Event ev) {
  uint64_t sid = look(n).session;
  schedule(n, [this, n, sid, e = std::move(ev)]() mutable {
    SimCoordinator& a = *look(n).agent;
    if (look(n).session != sid || !a.member_) return;
    // The event runs once: the agent takes it (a cluster state's text, a peer list)
    // without a copy; the hook reads it only before.
    hooks_.deliver(n, e, [&] { a.callbacks_.onEvent(std::move(e)); });
  });
}

void ZkEnsemble::answerWrite(int n, uint64_t serial, StateWriteFinished r) {
  if (!look(n).agent) return;
  SimCoordinator& a = *look(n).agent;
  if (a.writeSerial_ != serial || !a.pendingWrite_) return;
  auto done = std::move(a.pendingWrite_);
  a.pendingWrite_ = nullptr;
  hooks_.deliver(n, r, [&] { done(r); });
}

void ZkEnsemble::notifyAll(bool state) {
  ++changes_;  // needResync, and the deliveries
  std::vector<int> told;
  for (size_t i = 0; i < clients_.size(); ++i) {
    ZkClient& c = clients_[i];
    if (!c.agent || !c.ready || c.session == 0) continue;
    if (c.partitioned) {
      c.needResync = true;
    } else {
      told.push_back(static_cast<int>(i));
    }
  }
  if (told.empty()) return;
  // One list for every client told: a copy for each but the last, which takes it.
  PeerList active = state ? PeerList{} : activePeers();
  for (size_t k = 0; k < told.size(); ++k) {
    if (state) {
      deliver(told[k], ClusterStateChanged{stateNode()});
    } else {
      deliver(told[k],
              ActivePeersChanged{k + 1 < told.size() ? PeerList(active) : std::move(active), {}, notStreaming(), reports()});
    }
  }
}

void ZkEnsemble::write(int n, uint64_t serial, const ClusterState& state, int32_t expectedVersion,
                       const std::string& reason, std::vector<ElectionNodeCheck> checks) {
  ZkClient& c = client(n);
  trace_.trace('A', [&] {
    return c.id + " -> write generation " + std::to_string(state.generation) + " expecting v" +
           std::to_string(expectedVersion) + ": " + reason;
  });
  uint64_t sid = c.session;
  int64_t issued = q_.now();
  std::optional<WalPosition> wal = hooks_.writerWal ? hooks_.writerWal(n) : std::nullopt;
  const bool alive = sessionAlive(sid);
  if (!alive || c.partitioned) {
    StateWriteFinished r{false, alive ? "connection loss" : "session expired", false, -1};
    schedule(n, [this, n, serial, r] { answerWrite(n, serial, r); });
    return;
  }
  std::string data = state.serialize();
  std::string writer = c.id;
  // Most writes reach the leader in milliseconds; some wait behind a slow quorum (a
  // disk sync, a leader election) while the writer's postgres goes on.
  int64_t toServer = model_.slowWritePermille > 0 && rng_.chance(model_.slowWritePermille)
                         ? model_.slowToServer.draw(rng_)
                         : model_.toServer.draw(rng_);
  q_.after(toServer, [this, n, serial, sid, issued, wal, data = std::move(data), expectedVersion, reason,
                       writer = std::move(writer), checks = std::move(checks)] {
    auto it = sessions_.find(sid);
    // A request sent just before a partition may or may not have reached the server.
    bool reached = it != sessions_.end() && it->second.alive && (it->second.connected || rng_.chance(500)) &&
                   !leaderless();
    StateWriteFinished res{false, "connection loss", false, -1};
    if (reached) res = cas(writer, data, expectedVersion, issued, wal, reason, checks);
    q_.after(model_.fromServer.draw(rng_), [this, n, serial, sid, res] {
      if (!look(n).agent) return;
      StateWriteFinished r = res;
      if (look(n).session != sid || !sessionAlive(sid)) {
        r = StateWriteFinished{false, "session expired", false, -1};
      } else if (look(n).partitioned) {
        r = StateWriteFinished{false, "connection loss", false, -1};  // it may have been applied
      }
      schedule(n, [this, n, serial, r] { answerWrite(n, serial, r); });
    });
  });
}

StateWriteFinished ZkEnsemble::cas(const std::string& writer, const std::string& data, int32_t expectedVersion,
                                   int64_t issuedAt, std::optional<WalPosition> writerWal, const std::string& reason,
                                   const std::vector<ElectionNodeCheck>& checks) {
  if (!zk_.accepts(expectedVersion)) {
    trace_.trace('Z', [&] {
      return "write by " + writer + " expecting v" + std::to_string(expectedVersion) + " lost the race (at v" +
             std::to_string(zk_.version()) + ")";
    });
    return StateWriteFinished{false, "bad version", true, -1};
  }
  // A multi-op: the set, then one check per counted report; all or nothing.
  if (const std::string failed = failedCheck(checks); !failed.empty()) {
    trace_.trace('Z', [&] { return "write by " + writer + " lost the race: " + failed; });
    return StateWriteFinished{false, failed, true, -1};
  }
  if (hooks_.admit && !hooks_.admit(writer, data)) return StateWriteFinished{false, "invalid", false, -1};
  zk_.put(data);
  notifyAll(true);
  if (hooks_.written) hooks_.written(writer, issuedAt, writerWal, reason);
  return StateWriteFinished{true, "", false, zk_.version()};
}

void ZkEnsemble::partition(int n, int64_t duration, int64_t reportAfterMs, int64_t touchLagMs) {
  ZkClient& c = client(n);
  if (c.partitioned) return;
  if (reportAfterMs < 0) reportAfterMs = model_.sessionTimeoutMs * 2 / 3;
  c.partitioned = true;
  uint64_t serial = ++c.partitionSerial;
  trace_.trace('F', [&] { return c.id + " cut off from ZooKeeper for " + std::to_string(duration) + " ms"; });
  if (c.session != 0 && sessionAlive(c.session)) {
    disconnect(c.session, "no heartbeat within the session timeout", touchLagMs);
    // ZooKeeper's client reports the lost connection once the server has been silent
    // for 2/3 of the session timeout (CoordinatorConnection), on its own clock: also if
    // the session expired meanwhile (it learns that only once it reaches a server).
    uint64_t sid = c.session;
    q_.after(reportAfterMs, [this, n, run = runOf(n), serial, sid] {
      ZkClient& x = client(n);
      if (!runs(n, run) || x.partitionSerial != serial || x.session != sid || !x.agent->member_) return;
      x.lossReported = true;
      trace_.trace('Z', [&] { return x.id + " client: connection to ZooKeeper lost"; });
      x.agent->callbacks_.onConnection(
          driver::CoordinatorConnection{false, static_cast<int64_t>(sid), model_.sessionTimeoutMs});
    });
  }
  q_.after(duration, [this, n, serial] {
    if (look(n).partitionSerial == serial) heal(n);
  });
}

void ZkEnsemble::heal(int n) {
  ZkClient& c = client(n);
  if (!c.partitioned) return;
  c.partitioned = false;
  ++c.partitionSerial;
  trace_.trace('F', [&] { return c.id + " reaches ZooKeeper again"; });
  if (!c.agent) return;
  auto it = sessions_.find(c.session);
  if (c.session != 0 && it != sessions_.end() && it->second.alive) {
    it->second.connected = true;
    ++it->second.disconnects;
    // A report published meanwhile is written on the reconnection (a streaming flag is
    // heard with the next news, as before quorum mode: sync mode's runs are unchanged).
    if (c.ready && c.agent->member_ && it->second.report != c.agent->report_ && syncElectionNode(n)) notifyAll(false);
    if (c.needResync && c.ready) {  // the watches fire for what changed meanwhile
      c.needResync = false;
      deliver(n, ActivePeersChanged{activePeers(), {}, notStreaming(), reports()});
      deliver(n, ClusterStateChanged{stateNode()});
    }
    // As the real client: the regain after the state read again (deliveries keep order).
    if (std::exchange(c.lossReported, false) && c.agent->member_) {
      uint64_t sid = c.session;
      schedule(n, [this, n, sid] {
        ZkClient& x = client(n);
        if (x.session != sid || !x.agent->member_) return;
        trace_.trace('Z', [&] { return x.id + " client: connected again, same session"; });
        x.agent->callbacks_.onConnection(
            driver::CoordinatorConnection{true, static_cast<int64_t>(sid), model_.sessionTimeoutMs});
      });
    }
    return;
  }
  if (c.connecting || !c.agent->member_) return;  // its retry loop reconnects, or it left
  // The session expired while cut off: the client learns it now and starts a new one.
  c.lossReported = false;
  c.session = 0;
  c.ready = false;
  c.connecting = true;
  q_.after(model_.reconnect.draw(rng_), [this, n, run = runOf(n)] { connect(n, run); });
}

// ---------------------------------------------------------------- one agent's client

SimCoordinator::SimCoordinator(ZkEnsemble& ensemble, int host)
    : zk_(ensemble), host_(host), run_(++ensemble.lastRun_) {
  zk_.client(host_).agent = this;
  zk_.client(host_).agentRun = run_;
}

SimCoordinator::~SimCoordinator() {
  ZkClient& c = zk_.client(host_);
  if (c.agent != this) return;
  c.agent = nullptr;
  c.agentRun = 0;
}

Result<bool> SimCoordinator::join(driver::CoordinatorCallbacks cb) {
  callbacks_ = std::move(cb);
  member_ = true;
  zk_.client(host_).connecting = true;
  zk_.q_.after(zk_.model_.connect.draw(zk_.joinRng_),
               [&zk = zk_, n = host_, run = run_] { zk.connect(n, run); });
  return true;
}

void SimCoordinator::leave() {
  if (!member_) return;
  member_ = false;
  callbacks_ = {};
  ZkClient& c = zk_.client(host_);
  zk_.trace_.trace('A', [&] { return c.id + " -> leave ZooKeeper"; });
  zk_.closeSessionOf(host_);
  c.connecting = false;
  c.ready = false;
  if (pendingWrite_) {
    zk_.q_.after(0, [&zk = zk_, n = host_, serial = writeSerial_, run = run_] {
      if (zk.runs(n, run)) zk.answerWrite(n, serial, StateWriteFinished{false, "left ZooKeeper", false, -1});
    });
  }
  if (pendingReport_) {
    zk_.q_.after(0, [&zk = zk_, n = host_, serial = reportSerial_, run = run_] {
      if (zk.runs(n, run)) {
        zk.answerReport(n, serial, ReportPublished{false, "left ZooKeeper: the election node may hold either", -1});
      }
    });
  }
}

void SimCoordinator::putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                                     std::function<void(StateWriteFinished)> done) {
  putCheckedClusterState(state, expectedVersion, reason, {}, std::move(done));
}

void SimCoordinator::putCheckedClusterState(const ClusterState& state, int32_t expectedVersion,
                                            const std::string& reason, const std::vector<ElectionNodeCheck>& checks,
                                            std::function<void(StateWriteFinished)> done) {
  if (pendingWrite_ && zk_.hooks_.violation) {
    zk_.hooks_.violation("two-writes", zk_.look(host_).id + " wrote while a write was in flight");
  }
  pendingWrite_ = std::move(done);
  writeSince_ = zk_.q_.now();
  uint64_t serial = ++writeSerial_;
  if (!member_) {
    zk_.q_.after(0, [&zk = zk_, n = host_, serial, run = run_] {
      if (zk.runs(n, run)) {
        zk.answerWrite(n, serial, StateWriteFinished{false, "not a member of the ZooKeeper cluster", false, -1});
      }
    });
    return;
  }
  zk_.write(host_, serial, state, expectedVersion, reason, checks);
}

void SimCoordinator::publishReport(const std::optional<TakeoverReport>& report,
                                   std::function<void(ReportPublished)> done) {
  const int n = host_;
  if (pendingReport_) {
    zk_.schedule(n, [&zk = zk_, n, replaced = std::move(pendingReport_)] {
      const ReportPublished r{false, "replaced by a later publication", -1};
      zk.hooks_.deliver(n, r, [&] { replaced(r); });
    });
    pendingReport_ = nullptr;
  }
  report_ = report;
  if (report_) report_->nodeVersion = -1;
  pendingReport_ = std::move(done);
  const uint64_t serial = ++reportSerial_;
  zk_.trace_.trace('A', [&] {
    return zk_.look(n).id + " -> publish " + (report_ ? "the report " + report_->describe() : std::string("no report"));
  });
  const ZkClient& c = zk_.look(n);
  if (!member_ || !c.ready || c.partitioned || !zk_.sessionAlive(c.session)) {
    zk_.schedule(n, [&zk = zk_, n, serial] {
      zk.answerReport(n, serial, ReportPublished{false, "not connected to ZooKeeper: published once connected", -1});
    });
    return;
  }
  const uint64_t sid = c.session;
  zk_.q_.after(zk_.model_.toServer.draw(zk_.rng_), [&zk = zk_, n, serial, sid] {
    auto it = zk.sessions_.find(sid);
    const bool reached = it != zk.sessions_.end() && it->second.alive && it->second.connected && !zk.leaderless() &&
                         zk.look(n).session == sid;
    if (reached && zk.syncElectionNode(n)) zk.notifyAll(false);
    const int32_t version = reached ? it->second.nodeVersion : -1;
    zk.q_.after(zk.model_.fromServer.draw(zk.rng_), [&zk, n, serial, sid, reached, version] {
      ReportPublished r{true, "", version};
      if (!reached || zk.look(n).session != sid || !zk.sessionAlive(sid) || zk.look(n).partitioned) {
        r = ReportPublished{false, "writing the election node failed: connection loss (it may hold either)", -1};
      }
      zk.schedule(n, [&zk, n, serial, r] { zk.answerReport(n, serial, r); });
    });
  });
}

void SimCoordinator::publishStreaming(bool streams) {
  if (streaming_ == streams) return;
  streaming_ = streams;
  const ZkClient& c = zk_.look(host_);
  if (member_ && c.ready && !c.partitioned && zk_.sessionAlive(c.session)) {
    zk_.syncElectionNode(host_);
    zk_.notifyAll(false);
  }
}

driver::CoordinatorStatus SimCoordinator::status() const {
  const ZkClient& c = zk_.look(host_);
  return driver::CoordinatorStatus{member_, c.session != 0 && !c.partitioned, c.ready, static_cast<int64_t>(c.session),
                                  "", ""};
}

}  // namespace dugong::simworld
