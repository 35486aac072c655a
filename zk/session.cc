// zk::Session: requests and their replies, the cluster-state write and an outcome of
// unknown result, the lease's round trips, watches, status (session_impl.h).
#include "zk/session.h"
#include "zk/session_impl.h"

namespace dugong::zk {

Result<bool> Session::Impl::start() {
  if (auto valid = options_.validate(); !valid) return valid;
  if (self_.id.empty() || self_.id.find('/') != std::string::npos) {
    return Error{"zookeeper: the peer id \"" + self_.id + "\" is empty or holds a '/'"};
  }
  if (started_) return Error{"zookeeper: session already started"};
  started_ = true;
  outlet_->io = &io_;
  detail::installClientLogging();
  openSession();
  if (onLease_) scheduleLease();
  return true;
}

void Session::Impl::stop(detail::CloseMode mode) {
  if (stopped_) return;
  stopped_ = true;
  outlet_->shut();
  reopenTimer_.cancel();
  abandonTimer_.cancel();
  setupRetryTimer_.cancel();
  leaseTimer_.cancel();
  if (pendingWrite_) pendingWrite_->deadline->cancel();
  pendingWrite_.reset();
  if (mode == detail::CloseMode::kKeepSession && zh_ != nullptr && sessionId_ != 0) {
    log_->info("zk: detaching from session {}: it stays open on the server (election node {}) until it "
               "expires or a restarted agent re-attaches",
               sessionIdText(sessionId_), electionNode_.empty() ? "not created yet" : electionNode_);
  }
  closeHandle(mode);
}

void Session::Impl::onWatch(const WatchNotice& n) {
  if (stopped_ || n.generation != generation_ || zh_ == nullptr) return;
  if (n.type == ZOO_SESSION_EVENT) {
    onSessionEvent(n.state);
    return;
  }
  if (n.path == layout_.state()) {
    log_->debug("zk: watch fired on {} (type {}); re-reading", n.path, n.type);
    refreshState();
  } else if (n.path == layout_.election()) {
    log_->debug("zk: watch fired on {} (type {}); re-reading", n.path, n.type);
    refreshActive();
  } else if (watched_.count(n.path)) {
    log_->debug("zk: watch fired on {} (type {}); re-reading", n.path, n.type);
    refreshWatched(n.path);
  } else if (n.path.rfind(layout_.election() + "/", 0) == 0) {
    // A peer's election node changed (its data state) or went: read it again.
    identities_.erase(n.path.substr(layout_.election().size() + 1));
    refreshActive();
  }
}

void Session::Impl::putClusterState(const ClusterState& state, int32_t expectedVersion,
                                    const std::vector<ElectionNodeCheck>& checks, WriteCallback done,
                                    std::string reason) {
  auto failNow = [&](std::string error, bool lostRace = false) {
    log_->warn("zk: cluster-state write (expected version {}) refused: {}", expectedVersion, error);
    boost::asio::post(io_, [done = std::move(done), error = std::move(error), lostRace] {
      StateWriteFinished f;
      f.error = error;
      f.lostRace = lostRace;
      done(f);
    });
  };
  if (stopped_ || !started_) return failNow("the ZooKeeper session is not running");
  if (zh_ == nullptr || !connected_) return failNow("not connected to ZooKeeper (connection lost; retrying)");
  if (!initialized_) return failNow("the ZooKeeper session is not set up yet");
  if (pendingWrite_) return failNow("another cluster-state write is still in flight");
  if (expectedVersion < -1) return failNow("invalid expected version " + std::to_string(expectedVersion));

  auto call = newCall([this](Reply r) { onWriteReply(std::move(r)); });
  for (const ElectionNodeCheck& c : checks) {
    auto node = nodeOfPeer_.find(c.peerId);
    // Not present as far as this session knows: its report is gone, as a failed check.
    if (node == nodeOfPeer_.end()) return failNow("lost the race: " + c.peerId + " has no election node", true);
    call->checkPaths.push_back(layout_.election() + "/" + node->second);
    call->checkPeers.push_back(c.peerId);
  }
  call->ops.resize(2 + checks.size());
  call->results.resize(call->ops.size());
  call->stateBytes = state.serialize();
  call->historyBytes = historyRecord(nowMs(), call->stateBytes, reason);
  call->statePath = layout_.state();
  call->historyPrefix = layout_.historyPrefix();
  const ACL_vector* acl = detail::aclFor(options_);
  if (expectedVersion == -1) {
    zoo_create_op_init(&call->ops[0], call->statePath.c_str(), call->stateBytes.data(),
                       static_cast<int>(call->stateBytes.size()), acl, ZOO_PERSISTENT, nullptr, 0);
  } else {
    zoo_set_op_init(&call->ops[0], call->statePath.c_str(), call->stateBytes.data(),
                    static_cast<int>(call->stateBytes.size()), expectedVersion, &call->setStat);
  }
  zoo_create_op_init(&call->ops[1], call->historyPrefix.c_str(), call->historyBytes.data(),
                     static_cast<int>(call->historyBytes.size()), acl, ZOO_PERSISTENT_SEQUENTIAL,
                     call->historyPathBuf.data(), static_cast<int>(call->historyPathBuf.size()));
  for (size_t i = 0; i < checks.size(); ++i) {
    zoo_check_op_init(&call->ops[2 + i], call->checkPaths[i].c_str(), checks[i].version);
  }

  auto pending = std::make_unique<PendingWrite>();
  pending->id = ++writeCounter_;
  pending->expectedVersion = expectedVersion;
  pending->bytes = call->stateBytes;
  pending->done = std::move(done);
  pending->reason = reason;
  pending->checkPeers = call->checkPeers;
  pending->deadline = std::make_unique<boost::asio::steady_timer>(io_);
  pendingWrite_ = std::move(pending);

  Call* raw = call.get();
  int rc = zoo_amulti(zh_, static_cast<int>(raw->ops.size()), raw->ops.data(), raw->results.data(), onMultiCompletion,
                      call.release());
  ++requestsSent_;
  if (rc != ZOK) {
    // The client did not take the request: no completion will come.
    takeBack(raw);
    completeWrite(failure("the write could not be sent: " + describeRc(rc)));
    return;
  }
  log_->info("zk: writing cluster state (expected version {}{}): {}", expectedVersion,
             checks.empty() ? "" : ", checking the election nodes of " + std::to_string(checks.size()) + " members",
             reason.empty() ? "no reason given" : reason);
}

void Session::Impl::watchNode(const std::string& path, std::function<void(StateNode)> onChange) {
  watched_[path].onChange = std::move(onChange);
  if (initialized_ && connected_) refreshWatched(path);
}

void Session::Impl::setDataState(std::optional<PeerDataState> data) {
  dataState_ = std::move(data);
  syncElectionData();
}

void Session::publishReport(std::optional<TakeoverReport> report, std::function<void(ReportPublished)> done) {
  impl_->publishReport(std::move(report), std::move(done));
}

void Session::Impl::setStreaming(bool streams) {
  streaming_ = streams;
  syncElectionData();
}

SessionStatus Session::Impl::status() const {
  SessionStatus s;
  s.connected = connected_;
  s.initialized = initialized_;
  s.sessionId = sessionId_;
  s.sessionsOpened = sessionsOpened_;
  s.electionNode = electionNode_;
  s.lastError = lastError_;
  s.requestsSent = requestsSent_;
  s.sessionsLost = sessionsLost_;
  s.lastSessionLost = lastSessionLost_;
  s.resumed = resumed_;
  return s;
}

std::optional<SessionCredentials> Session::Impl::credentials() const {
  if (zh_ == nullptr || sessionId_ == 0) return std::nullopt;
  const clientid_t* id = zoo_client_id(zh_);
  if (id == nullptr || id->client_id == 0) return std::nullopt;
  return SessionCredentials{id->client_id, std::string(id->passwd, sizeof id->passwd)};
}

std::unique_ptr<Call> Session::Impl::newCall(std::function<void(Reply)> done) {
  auto call = std::make_unique<Call>();
  call->impl = weak_from_this();
  call->outlet = outlet_;
  call->done = std::move(done);
  if (handleCtx_) {
    call->outstanding = handleCtx_->outstanding;
    call->outstanding->add(call.get());
  }
  return call;
}

void Session::Impl::scheduleLease() {
  const int timeoutMs = zh_ != nullptr && zoo_recv_timeout(zh_) > 0 ? zoo_recv_timeout(zh_) : options_.sessionTimeoutMs;
  leaseTimer_.expires_after(std::chrono::milliseconds(options_.leaseIntervalFor(timeoutMs)));
  leaseTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || self->stopped_) return;
    self->sendLease();
    self->scheduleLease();
  });
}

void Session::Impl::sendLease() {
  if (!connected_ || !initialized_ || zh_ == nullptr || (leaseInFlight_ && leaseEpoch_ == epoch_)) return;
  leaseInFlight_ = true;
  leaseEpoch_ = epoch_;
  const auto sentAt = std::chrono::steady_clock::now();
  const int64_t sid = sessionId_;
  const int timeoutMs = zoo_recv_timeout(zh_);
  const int intervalMs = options_.leaseIntervalFor(timeoutMs);
  const std::string path = layout_.root();
  request(
      [this, sentAt, sid, timeoutMs, intervalMs](Reply r) {
        leaseInFlight_ = false;
        if (r.rc != ZOK || sid != sessionId_ || !onLease_) return;
        onLease_(LeaseConfirmation{sentAt, sid, timeoutMs, intervalMs});
      },
      [&](Call* c) { return zoo_async(zh_, path.c_str(), onStringCompletion, c); });
}

StateWriteFinished Session::Impl::failure(std::string error, bool lostRace) {
  StateWriteFinished f;
  f.error = std::move(error);
  f.lostRace = lostRace;
  return f;
}

void Session::Impl::onWriteReply(Reply r) {
  if (!pendingWrite_ || pendingWrite_->unknown) return;  // resolved another way already
  PendingWrite& w = *pendingWrite_;
  if (r.rc == ZOK) {
    StateWriteFinished f;
    f.ok = true;
    f.newVersion = w.expectedVersion == -1 ? 0 : r.stat.version;
    log_->info("zk: wrote cluster state version {} (history {})", f.newVersion, r.path);
    return completeWrite(f);
  }
  // A check that failed (the ops before the failing one answer ZOK, those after
  // ZRUNTIMEINCONSISTENCY): the counted report was withdrawn, changed, or went.
  for (size_t i = 2; i < r.opErrors.size() && i - 2 < w.checkPeers.size(); ++i) {
    const int e = r.opErrors[i];
    if (e != ZBADVERSION && e != ZNONODE) continue;
    std::string why = "the election node of " + w.checkPeers[i - 2] +
                      (e == ZNONODE ? " is gone" : " changed since its report was counted");
    log_->warn("zk: cluster-state write lost the race: {}", why);
    return completeWrite(failure("lost the race: " + why, true));
  }
  int first = r.opErrors.empty() ? r.rc : r.opErrors[0];
  if (first == ZBADVERSION || first == ZNODEEXISTS || first == ZNONODE) {
    std::string why = first == ZBADVERSION ? "the state is no longer at version " + std::to_string(w.expectedVersion)
                      : first == ZNODEEXISTS ? std::string("the state was created by another writer")
                                             : std::string("the state was deleted");
    log_->warn("zk: cluster-state write lost the race: {}", why);
    return completeWrite(failure("lost the race: " + why, true));
  }
  if (detail::outcomeUnknown(r.rc)) {
    markWriteUnknown();
    if (connected_ && initialized_) resolveUnknownWrite();
    return;
  }
  log_->error("zk: cluster-state write failed: {}", describeRc(r.rc));
  completeWrite(failure("the write failed: " + describeRc(r.rc)));
}

void Session::Impl::markWriteUnknown() {
  PendingWrite& w = *pendingWrite_;
  if (w.unknown) return;
  w.unknown = true;
  int timeoutMs = options_.unknownOutcomeTimeoutMs > 0 ? options_.unknownOutcomeTimeoutMs : options_.sessionTimeoutMs;
  log_->warn("zk: the connection was lost during the cluster-state write; resolving it by re-reading the state "
             "once reconnected (at most {} ms)",
             timeoutMs);
  w.deadline->expires_after(std::chrono::milliseconds(timeoutMs));
  w.deadline->async_wait([weak = weak_from_this(), id = w.id](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || !self->pendingWrite_ || self->pendingWrite_->id != id) return;
    self->completeWrite(failure(
        "outcome unknown: the connection was lost during the write and was not back in time to check; the state "
        "is re-read on reconnection"));
  });
}

void Session::Impl::resolveUnknownWrite() {
  if (!pendingWrite_ || !pendingWrite_->unknown || pendingWrite_->resolving || zh_ == nullptr) return;
  pendingWrite_->resolving = true;
  uint64_t id = pendingWrite_->id;
  std::string path = layout_.state();
  request(
      [this, id, path](Reply synced) {
        if (!outcomeReadable(id, synced)) return;
        request([this, id](Reply r) { resolveFromRead(id, r); },
                [&](Call* c) { return zoo_aget(zh_, path.c_str(), 0, onDataCompletion, c); });
      },
      [&](Call* c) { return zoo_async(zh_, path.c_str(), onStringCompletion, c); });
}

bool Session::Impl::outcomeReadable(uint64_t id, const Reply& r) {
  if (!pendingWrite_ || pendingWrite_->id != id) return false;
  if (r.rc == ZOK || r.rc == ZNONODE) return true;
  pendingWrite_->resolving = false;
  log_->info("zk: could not check the write's outcome yet ({})", describeRc(r.rc));
  return false;
}

void Session::Impl::resolveFromRead(uint64_t id, const Reply& r) {
  if (!outcomeReadable(id, r)) return;
  PendingWrite& w = *pendingWrite_;
  w.resolving = false;
  const bool exists = r.rc == ZOK;
  const bool producedByAWrite = w.expectedVersion == -1 || r.stat.version > w.expectedVersion;
  if (exists && r.data == w.bytes && producedByAWrite) {
    StateWriteFinished f;
    f.ok = true;
    f.newVersion = r.stat.version;
    log_->info("zk: the interrupted write had been applied (state version {})", f.newVersion);
    return completeWrite(f);
  }
  const bool unchanged = w.expectedVersion == -1 ? !exists : (exists && r.stat.version == w.expectedVersion);
  if (unchanged) {
    log_->warn("zk: the interrupted write was not applied");
    return completeWrite(failure("the write was not applied (the connection was lost before it completed)"));
  }
  log_->warn("zk: the interrupted write was not applied; another writer changed the state");
  completeWrite(failure("lost the race: another writer changed the state while the connection was lost", true));
}

void Session::Impl::completeWrite(StateWriteFinished result) {
  if (!pendingWrite_) return;
  auto w = std::move(pendingWrite_);
  w->deadline->cancel();
  if (!result.ok) lastError_ = result.error;
  w->done(std::move(result));
}

void Session::Impl::noteError(std::string message) {
  log_->error("zk: {}", message);
  lastError_ = std::move(message);
}

namespace session_internal {

void postWatch(HandleCtx* ctx, WatchNotice notice) {
  ctx->outlet->post([impl = ctx->impl, notice = std::move(notice)] {
    if (auto self = impl.lock()) self->onWatch(notice);
  });
}

}  // namespace session_internal

Session::Session(boost::asio::io_context& io, ZkOptions options, PeerIdentity self, EventCallback onEvent)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(self), std::move(onEvent))) {}

Session::~Session() { impl_->stop(detail::CloseMode::kEndSession); }

void Session::detach() { impl_->stop(detail::CloseMode::kKeepSession); }

void Session::setLeaseCallback(std::function<void(LeaseConfirmation)> onLease) {
  impl_->setLeaseCallback(std::move(onLease));
}

void Session::setSessionCallback(std::function<void(SessionCredentials)> onSession) {
  impl_->setSessionCallback(std::move(onSession));
}

bool waitForClosedSessions(std::chrono::milliseconds timeout) { return detail::waitForClosedHandles(timeout); }

Result<bool> Session::start() { return impl_->start(); }

void Session::putClusterState(const ClusterState& state, int32_t expectedVersion, WriteCallback done,
                              std::string reason) {
  impl_->putClusterState(state, expectedVersion, {}, std::move(done), std::move(reason));
}

void Session::putCheckedClusterState(const ClusterState& state, int32_t expectedVersion,
                                     const std::vector<ElectionNodeCheck>& checks, WriteCallback done,
                                     std::string reason) {
  impl_->putClusterState(state, expectedVersion, checks, std::move(done), std::move(reason));
}

SessionStatus Session::status() const { return impl_->status(); }

void Session::setConnectionCallback(std::function<void(ConnectionChange)> onChange) {
  impl_->setConnectionCallback(std::move(onChange));
}

std::optional<SessionCredentials> Session::credentials() const { return impl_->credentials(); }

void Session::watchNode(const std::string& path, std::function<void(StateNode)> onChange) {
  impl_->watchNode(path, std::move(onChange));
}

void Session::setDataState(std::optional<PeerDataState> data) { impl_->setDataState(std::move(data)); }
void Session::setStreaming(bool streams) { impl_->setStreaming(streams); }

}  // namespace dugong::zk

