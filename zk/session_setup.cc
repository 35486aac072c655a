// zk::Session: opening a session and its handle, the setup on each new session (the
// cluster's nodes, this peer's election node, the first reads), losing and reopening it,
// and reading the state, the election and the watched nodes (session_impl.h).
#include "zk/session_impl.h"

namespace dugong::zk {

void Session::Impl::openSession() {
  if (stopped_) return;
  closeHandle();
  ++generation_;
  ++epoch_;
  ++sessionsOpened_;
  resetSessionState();
  auto ctx = std::make_unique<HandleCtx>();
  ctx->impl = weak_from_this();
  ctx->outlet = outlet_;
  ctx->generation = generation_;
  std::string hosts = options_.hosts();
  // Only the first handle re-attaches; after an expiry, a new session.
  clientid_t resumeId{};
  const bool resuming = resume_.has_value();
  if (resuming) {
    resumeId.client_id = resume_->sessionId;
    std::memcpy(resumeId.passwd, resume_->password.data(), std::min(resume_->password.size(), sizeof resumeId.passwd));
    log_->info("zk: re-attaching to session {} (kept by this peer's previous run)", sessionIdText(resume_->sessionId));
    resume_.reset();
  }
  openedAt_ = std::chrono::steady_clock::now();  // before any ConnectRequest of this handle
  zh_ = zookeeper_init2(hosts.c_str(), onWatcherEvent, options_.sessionTimeoutMs, resuming ? &resumeId : nullptr,
                        ctx.get(), ZOO_NO_LOG_CLIENTENV, detail::clientLogLine);
  if (zh_ == nullptr) {
    noteError("could not create a ZooKeeper handle for \"" + hosts + "\": " + std::strerror(errno));
    scheduleReopen();
    return;
  }
  handleCtx_ = std::move(ctx);
  // The C client resolves the host list again on every I/O step by default (getaddrinfo:
  // files and netlink, most of an idle agent's system calls); once a minute is enough.
  zoo_set_servers_resolution_delay(zh_, 60000);
  log_->info("zk: opening a session to {} (root {}, timeout {} ms, attempt {})", hosts, layout_.root(),
             options_.sessionTimeoutMs, sessionsOpened_);
  if (options_.auth) {
    std::string creds = options_.auth->credentials();
    request([this](Reply r) {
              if (r.rc != ZOK && r.rc != ZCLOSING) noteError("digest authentication failed: " + describeRc(r.rc));
            },
            [&](Call* c) {
              return zoo_add_auth(zh_, "digest", creds.data(), static_cast<int>(creds.size()), onVoidCompletion, c);
            });
  }
}

void Session::Impl::resetSessionState() {
  connected_ = false;
  initialized_ = false;
  reportedLoss_ = false;  // the next ZkInitialized reports the new session
  regainOwed_ = false;
  stateChangedDuringSetup_ = false;
  activeChangedDuringSetup_ = false;
  sessionId_ = 0;
  electionNode_.clear();
  electionBytesSent_.clear();
  dataSyncInFlight_ = false;
  electionVersion_ = -1;
  identities_.clear();
  dataStates_.clear();
  notStreamingNodes_.clear();
  reportNodes_.clear();
  // A publication in flight was dropped with the session; the report is published in the
  // new session's node.
  if (reportDone_) answerReport(ReportPublished{false, "the ZooKeeper session was lost", -1});
  ++setupRun_;
  if (pendingWrite_) pendingWrite_->resolving = false;
  stateRefresh_ = Refresh{stateRefresh_.token + 1};
  activeRefresh_ = Refresh{activeRefresh_.token + 1};
  for (auto& [path, w] : watched_) w.refresh = Refresh{w.refresh.token + 1};
}

void Session::Impl::closeHandle(detail::CloseMode mode) {
  if (zh_ == nullptr) return;
  zhandle_t* zh = zh_;
  zh_ = nullptr;
  connected_ = false;
  detail::closeLater(zh, mode, std::shared_ptr<HandleCtx>(std::move(handleCtx_)));
}

void Session::Impl::scheduleReopen() {
  if (stopped_) return;
  auto delay = nextBackoff();
  log_->info("zk: opening a new session in {} ms", delay.count());
  reopenTimer_.expires_after(delay);
  reopenTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->openSession();
  });
}

std::chrono::milliseconds Session::Impl::nextBackoff() {
  int64_t d = options_.backoffInitialMs;
  for (int i = 0; i < backoffAttempt_ && d < options_.backoffMaxMs; ++i) d *= 2;
  d = std::min<int64_t>(d, options_.backoffMaxMs);
  ++backoffAttempt_;
  std::uniform_int_distribution<int64_t> jitter(d / 2, d);
  return std::chrono::milliseconds(jitter(rng_));
}

void Session::Impl::onSessionEvent(int state) {
  if (state == ZOO_CONNECTED_STATE) {
    const clientid_t* id = zoo_client_id(zh_);
    sessionId_ = id != nullptr ? id->client_id : 0;
    bool reconnect = initialized_;
    connected_ = true;
    abandonTimer_.cancel();
    const bool newSession = sessionId_ != 0 && sessionId_ != reportedSessionId_;
    if (newSession) resumed_ = sessionsOpened_ == 1 && options_.resume && options_.resume->sessionId == sessionId_;
    log_->info("zk: connected, session {} (negotiated timeout {} ms){}", sessionIdText(sessionId_),
               zoo_recv_timeout(zh_),
               reconnect    ? "; same session, re-reading state and peers"
               : newSession && resumed_ ? "; re-attached to the session of the previous run"
                                        : "");
    if (newSession && !resumed_ && onLease_ && sessionId_ != 0) {
      // A new session was created by the leader after this handle was opened: it lives
      // at least a session timeout from then, as after a confirmed round trip sent then.
      const int timeoutMs = zoo_recv_timeout(zh_);
      onLease_(LeaseConfirmation{openedAt_, sessionId_, timeoutMs, options_.leaseIntervalFor(timeoutMs)});
    }
    if (newSession) {
      reportedSessionId_ = sessionId_;
      if (onSession_) {
        if (auto c = credentials()) onSession_(*c);
      }
    }
    if (!initialized_) {
      runSetup();
    } else {
      // The regain is reported once the state has been read again (after its change, if it
      // changed meanwhile): a primary that resumes writes on it resumes on the state of now.
      regainOwed_ = reportedLoss_;
      refreshState();
      refreshActive();
      refreshAllWatched();
      resolveUnknownWrite();
      syncElectionData();
    }
  } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE ||
             state == ZOO_NOTCONNECTED_STATE) {
    const bool lost = connected_;
    if (lost) {
      log_->warn("zk: connection lost (session {} still valid); the client reconnects, no event for the peer",
                 sessionIdText(sessionId_));
    }
    connected_ = false;
    if (lost && initialized_ && !reportedLoss_) {
      reportedLoss_ = true;
      if (onConnection_) onConnection_(ConnectionChange{false, sessionId_, zoo_recv_timeout(zh_)});
    }
    if (lost) abandonLater();
  } else if (state == ZOO_EXPIRED_SESSION_STATE) {
    onSessionLost(sessionId_ != 0 ? "session " + sessionIdText(sessionId_) + " expired"
                                  : std::string("the session to re-attach to has expired (or is unknown)"));
  } else if (state == ZOO_AUTH_FAILED_STATE) {
    onSessionLost("authentication failed");
  } else {
    log_->warn("zk: session event in state {} ignored", stateName(state));
  }
}

void Session::Impl::abandonLater() {
  const int timeoutMs = zh_ != nullptr && zoo_recv_timeout(zh_) > 0 ? zoo_recv_timeout(zh_) : options_.sessionTimeoutMs;
  const int waitMs = std::max(2 * timeoutMs, 60000);
  abandonTimer_.expires_after(std::chrono::milliseconds(waitMs));
  abandonTimer_.async_wait([weak = weak_from_this(), gen = generation_, waitMs](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || self->stopped_ || gen != self->generation_ || self->connected_ || self->zh_ == nullptr) return;
    self->onSessionLost("no ZooKeeper server accepted session " + sessionIdText(self->sessionId_) + " for " +
                        std::to_string(waitMs) + " ms: it has expired, or the ensemble was rebuilt and refuses it");
  });
}

void Session::Impl::onSessionLost(const std::string& why) {
  noteError(why + "; the election node is gone; opening a new session");
  ++epoch_;  // drop what is still in flight for the lost session
  ++sessionsLost_;
  lastSessionLost_ = std::chrono::steady_clock::now();
  connected_ = false;
  initialized_ = false;
  reportedLoss_ = false;  // the next ZkInitialized reports the new session
  regainOwed_ = false;
  stateChangedDuringSetup_ = false;
  activeChangedDuringSetup_ = false;
  if (pendingWrite_) markWriteUnknown();
  closeHandle();
  scheduleReopen();
}

void Session::Impl::runSetup() {
  uint64_t run = ++setupRun_;
  log_->debug("zk: setting up session {} (run {})", sessionIdText(sessionId_), run);
  ensureNode(run, 0);
}

void Session::Impl::setupFailed(uint64_t run, const std::string& what, int rc) {
  if (!setupCurrent(run)) return;
  ++setupRun_;
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING || rc == ZSESSIONEXPIRED) {
    log_->info("zk: setup interrupted ({}: {}); it re-runs once reconnected", what, describeRc(rc));
    return;
  }
  noteError("setup failed: " + what + ": " + describeRc(rc));
  auto delay = nextBackoff();
  setupRetryTimer_.expires_after(delay);
  setupRetryTimer_.async_wait([weak = weak_from_this(), gen = generation_](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (self && gen == self->generation_ && self->connected_ && !self->initialized_) self->runSetup();
  });
}

void Session::Impl::ensureNode(uint64_t run, size_t index) {
  auto nodes = layout_.persistentNodes();
  if (index == nodes.size()) return findElectionNode(run);
  std::string path = nodes[index];
  request(
      [this, run, index, path](Reply r) {
        if (!setupCurrent(run)) return;
        if (r.rc == ZOK) log_->info("zk: created {}", path);
        if (r.rc == ZOK || r.rc == ZNODEEXISTS) return ensureNode(run, index + 1);
        setupFailed(run, "creating " + path, r.rc);
      },
      [&](Call* c) {
        return zoo_acreate(zh_, path.c_str(), "", 0, detail::aclFor(options_), ZOO_PERSISTENT, onStringCompletion,
                           c);
      });
}

void Session::Impl::findElectionNode(uint64_t run) {
  std::string dir = layout_.election();
  request(
      [this, run](Reply r) {
        if (!setupCurrent(run)) return;
        if (r.rc != ZOK) return setupFailed(run, "listing " + layout_.election(), r.rc);
        std::vector<std::string> mine;
        for (auto& name : r.strings) {
          if (peerIdOf(name) == self_.id) mine.push_back(layout_.election() + "/" + name);
        }
        checkOwnedNode(run, std::move(mine), 0);
      },
      [&](Call* c) { return zoo_aget_children(zh_, dir.c_str(), 0, onStringsCompletion, c); });
}

void Session::Impl::checkOwnedNode(uint64_t run, std::vector<std::string> candidates, size_t index) {
  if (index == candidates.size()) return createElectionNode(run);
  std::string path = candidates[index];
  request(
      [this, run, candidates = std::move(candidates), index, path](Reply r) mutable {
        if (!setupCurrent(run)) return;
        if (r.rc == ZOK && r.stat.ephemeralOwner == sessionId_) {
          electionNode_ = path;
          log_->info("zk: this session already owns election node {}", path);
          return readInitial(run);
        }
        if (r.rc == ZOK && r.stat.ephemeralOwner != sessionId_) {
          log_->warn("zk: election node {} has this peer's id but belongs to session {} (a previous run "
                     "of this peer whose session has not expired yet)",
                     path, sessionIdText(r.stat.ephemeralOwner));
        } else if (r.rc != ZNONODE) {
          return setupFailed(run, "checking " + path, r.rc);
        }
        checkOwnedNode(run, std::move(candidates), index + 1);
      },
      [&](Call* c) { return zoo_aexists(zh_, path.c_str(), 0, onStatCompletion, c); });
}

void Session::Impl::createElectionNode(uint64_t run) {
  std::string prefix = layout_.electionPrefix(self_.id);
  std::string bytes = electionBytes();
  request(
      [this, run, bytes](Reply r) {
        if (!setupCurrent(run)) return;
        if (r.rc != ZOK) return setupFailed(run, "creating the election node", r.rc);
        electionNode_ = r.path;
        electionBytesSent_ = bytes;
        electionVersion_ = 0;
        log_->info("zk: joined the election as {}", electionNode_);
        readInitial(run);
      },
      [&](Call* c) {
        return zoo_acreate(zh_, prefix.c_str(), bytes.data(), static_cast<int>(bytes.size()),
                           detail::aclFor(options_), ZOO_EPHEMERAL | ZOO_SEQUENCE, onStringCompletion, c);
      });
}

void Session::Impl::readInitial(uint64_t run) {
  readState(0, [this, run](int rc, StateNode state) {
    if (!setupCurrent(run)) return;
    if (rc != ZOK) return setupFailed(run, "reading " + layout_.state(), rc);
    readActive([this, run, state = std::move(state)](int rc2, PeerList active, PeerDataStates data) {
      if (!setupCurrent(run)) return;
      if (rc2 != ZOK) return setupFailed(run, "reading " + layout_.election(), rc2);
      initialized_ = true;
      backoffAttempt_ = 0;
      knownState_ = state;
      knownActive_ = active;
      knownData_ = data;
      knownNotStreaming_ = notStreaming_;
      knownReports_ = reports_;
      log_->info("zk: initialized: state {} (version {}), active peers {}",
                 state.exists ? "present" : "absent", state.version, peerIdList(active));
      onEvent_(ZkInitialized{state, active, data, resumed_, notStreaming_, reports_});
      syncElectionData();
      resolveUnknownWrite();
      // A watch that fired during setup may have been for data newer than what we read.
      if (std::exchange(stateChangedDuringSetup_, false)) refreshState();
      if (std::exchange(activeChangedDuringSetup_, false)) refreshActive();
      refreshAllWatched();
    });
  });
}

void Session::Impl::readState(int attempt, std::function<void(int, StateNode)> done) {
  readWatchedNode(layout_.state(), attempt, std::move(done));
}

void Session::Impl::readWatchedNode(const std::string& path, int attempt, std::function<void(int, StateNode)> done) {
  request(
      [this, path, attempt, done = std::move(done)](Reply r) mutable {
        if (r.rc == ZOK) return done(ZOK, StateNode{true, std::move(r.data), r.stat.version});
        if (r.rc != ZNONODE) return done(r.rc, StateNode{});
        request(
            [this, path, attempt, done = std::move(done)](Reply e) mutable {
              if (e.rc == ZNONODE) return done(ZOK, StateNode{});
              if (e.rc != ZOK) return done(e.rc, StateNode{});
              // Created in between: read it (bounded; a node that keeps flapping is
              // reported as a failed read and retried by the next watch).
              if (attempt >= 5) return done(ZSYSTEMERROR, StateNode{});
              if (zh_ == nullptr) return done(ZCLOSING, StateNode{});
              readWatchedNode(path, attempt + 1, std::move(done));
            },
            [&](Call* c) { return zoo_aexists(zh_, path.c_str(), 1, onStatCompletion, c); });
      },
      [&](Call* c) { return zoo_aget(zh_, path.c_str(), 1, onDataCompletion, c); });
}

void Session::Impl::readActive(std::function<void(int, PeerList, PeerDataStates)> done) {
  std::string dir = layout_.election();
  request(
      [this, done = std::move(done)](Reply r) mutable {
        if (r.rc != ZOK) return done(r.rc, PeerList{}, PeerDataStates{});
        auto names = sortElectionNodes(std::move(r.strings));
        std::map<std::string, std::optional<PeerIdentity>> kept;
        std::map<std::string, PeerDataState> keptData;
        std::map<std::string, TakeoverReport> keptReports;
        for (const auto& n : names) {
          if (auto it = identities_.find(n); it != identities_.end()) kept.insert(*it);
          if (auto it = dataStates_.find(n); it != dataStates_.end() && kept.count(n)) keptData.insert(*it);
          if (auto it = reportNodes_.find(n); it != reportNodes_.end() && kept.count(n)) keptReports.insert(*it);
        }
        identities_ = std::move(kept);
        dataStates_ = std::move(keptData);
        reportNodes_ = std::move(keptReports);
        readIdentities(std::move(names), 0, std::move(done));
      },
      [&](Call* c) { return zoo_aget_children(zh_, dir.c_str(), 1, onStringsCompletion, c); });
}

std::string Session::Impl::electionBytes() const {
  nlohmann::json j = self_.toJson();
  j["stateFormat"] = kClusterStateFormat;  // every format up to it is read (docs/decisions/0089)
  if (dataState_) j["data"] = dataState_->toJson();
  if (streaming_) j["streaming"] = *streaming_;
  if (report_) j["report"] = report_->toJson();
  return j.dump();
}

void Session::Impl::readReport(const std::string& name, const nlohmann::json& parsed, const Reply& r) {
  reportNodes_.erase(name);
  const bool object = !parsed.is_discarded() && parsed.is_object();
  if (object && parsed.contains("report")) {
    auto report = TakeoverReport::fromJson(parsed["report"]);
    if (report) {
      TakeoverReport noted = *report;
      noted.nodeVersion = r.stat.version;
      reportNodes_[name] = noted;
    } else {
      log_->warn("zk: election node {} holds an invalid takeover report ({}); not counted", name, report.error());
    }
  }
  if (electionNode_ != layout_.election() + "/" + name || dataSyncInFlight_) return;
  // This peer's own node, with no write of it in flight: what it holds now. A node this
  // run has not written yet (re-attached after an agent restart) keeps its report and
  // streaming flag until this run publishes its own: rewriting it would withdraw the
  // report behind the state machine's back, or change the version its write checks.
  if (!reportTold_ && object) {
    if (auto it = reportNodes_.find(name); it != reportNodes_.end()) report_ = it->second;
    if (!streaming_ && parsed.contains("streaming") && parsed["streaming"].is_boolean()) {
      streaming_ = parsed["streaming"].get<bool>();
    }
  }
  electionBytesSent_ = r.data;
  electionVersion_ = r.stat.version;
}

void Session::Impl::publishReport(std::optional<TakeoverReport> report, std::function<void(ReportPublished)> done) {
  if (reportDone_) answerReport(ReportPublished{false, "replaced by a later publication", -1});
  if (report) report->nodeVersion = -1;
  report_ = std::move(report);
  reportTold_ = true;
  reportDone_ = std::move(done);
  if (stopped_ || zh_ == nullptr || !connected_ || !initialized_ || electionNode_.empty()) {
    return answerReport(ReportPublished{false, "not connected to ZooKeeper: published once connected", -1});
  }
  syncElectionData();
}

void Session::Impl::answerReport(ReportPublished answer) {
  if (!reportDone_) return;
  boost::asio::post(io_, [done = std::exchange(reportDone_, nullptr), answer = std::move(answer)] { done(answer); });
}

void Session::Impl::syncElectionData() {
  if (zh_ == nullptr || !connected_ || !initialized_ || electionNode_.empty() || dataSyncInFlight_) return;
  std::string bytes = electionBytes();
  if (bytes == electionBytesSent_) return answerReport(ReportPublished{true, "", electionVersion_});
  dataSyncInFlight_ = true;
  std::string path = electionNode_;
  request(
      [this, bytes](Reply r) {
        dataSyncInFlight_ = false;
        if (r.rc != ZOK) {
          log_->info("zk: publishing this peer's election node failed ({}); tried again on reconnection",
                     describeRc(r.rc));
          return answerReport(ReportPublished{false, "writing the election node failed: " + describeRc(r.rc) +
                                                         " (it may hold either; written again on reconnection)",
                                              -1});
        }
        electionBytesSent_ = bytes;
        electionVersion_ = r.stat.version;
        log_->info("zk: published this peer's data state: {}; streaming: {}; takeover report: {} (node version {})",
                   dataState_ ? dataState_->describe() : "none", streaming_ ? (*streaming_ ? "yes" : "no") : "not published",
                   report_ ? report_->describe() : "none", electionVersion_);
        syncElectionData();  // changed again meanwhile
      },
      [&](Call* c) {
        return zoo_aset(zh_, path.c_str(), bytes.data(), static_cast<int>(bytes.size()), -1, onStatCompletion, c);
      });
}

void Session::Impl::refreshAllWatched() {
  for (const auto& [path, w] : watched_) refreshWatched(path);
}

void Session::Impl::refreshWatched(const std::string& path) {
  auto it = watched_.find(path);
  if (zh_ == nullptr || !initialized_ || it == watched_.end()) return;
  auto token = it->second.refresh.start();
  if (!token) return;
  readWatchedNode(path, 0, [this, path, token = *token](int rc, StateNode node) {
    WatchedNode& w = watched_[path];
    if (token != w.refresh.token) return;
    w.refresh.inFlight = false;
    if (rc == ZOK) {
      if (!w.known || !sameNode(node, *w.known)) {
        w.known = node;
        w.onChange(node);
      }
    } else {
      log_->info("zk: reading {} failed ({}); retried on reconnection", path, describeRc(rc));
    }
    if (w.refresh.again && connected_) refreshWatched(path);
  });
}

void Session::Impl::refreshState() {
  if (zh_ == nullptr) return;
  if (!initialized_) {  // fired while setting up: re-read once the init is delivered
    stateChangedDuringSetup_ = true;
    return;
  }
  auto token = stateRefresh_.start();
  if (!token) return;
  readState(0, [this, token = *token](int rc, StateNode node) {
    if (token != stateRefresh_.token) return;
    stateRefresh_.inFlight = false;
    if (rc == ZOK) {
      if (!sameNode(node, knownState_)) {
        knownState_ = node;
        log_->info("zk: cluster state changed: {} version {} ({} bytes)", node.exists ? "now" : "deleted,",
                   node.version, node.data.size());
        onEvent_(ClusterStateChanged{node});
      }
      reportRegainIfOwed();
    } else {
      log_->info("zk: re-reading the state failed ({}); retried on reconnection", describeRc(rc));
    }
    if (stateRefresh_.again && connected_) refreshState();
  });
}

void Session::Impl::reportRegainIfOwed() {
  if (!regainOwed_ || !connected_) return;
  regainOwed_ = false;
  reportedLoss_ = false;
  if (onConnection_) onConnection_(ConnectionChange{true, sessionId_, zoo_recv_timeout(zh_)});
}

void Session::Impl::refreshActive() {
  if (zh_ == nullptr) return;
  if (!initialized_) {
    activeChangedDuringSetup_ = true;
    return;
  }
  auto token = activeRefresh_.start();
  if (!token) return;
  readActive([this, token = *token](int rc, PeerList active, PeerDataStates data) {
    if (token != activeRefresh_.token) return;
    activeRefresh_.inFlight = false;
    if (rc == ZOK) {
      if (!samePeers(active, knownActive_) || data != knownData_ || notStreaming_ != knownNotStreaming_ ||
          reports_ != knownReports_) {
        log_->info("zk: active peers changed: {} -> {}{}{}{}", peerIdList(knownActive_), peerIdList(active),
                   data != knownData_ ? " (published data states changed)" : "",
                   notStreaming_ != knownNotStreaming_ ? " (published streaming changed)" : "",
                   reports_ != knownReports_ ? " (published takeover reports changed)" : "");
        knownActive_ = active;
        knownData_ = data;
        knownNotStreaming_ = notStreaming_;
        knownReports_ = reports_;
        onEvent_(ActivePeersChanged{active, data, notStreaming_, reports_});
      }
    } else {
      log_->info("zk: re-reading the election failed ({}); retried on reconnection", describeRc(rc));
    }
    if (activeRefresh_.again && connected_) refreshActive();
  });
}

}  // namespace dugong::zk
