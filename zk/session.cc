#include "zk/session.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "zk/c_client.h"
#include "zk/handle_closer.h"
#include "zk/layout.h"

namespace dugong::zk {

namespace {

using detail::describeRc;
using detail::sessionIdText;

// Where the C client's threads deliver completions and watch notices: the Session's
// loop until it stops; after that (its handles may be closed later, off the loop, and
// the loop may be gone), nowhere.
struct Outlet {
  std::mutex mu;
  boost::asio::io_context* io = nullptr;

  void post(std::function<void()> fn) {
    std::lock_guard lock(mu);
    if (io != nullptr) boost::asio::post(*io, std::move(fn));
  }
  void shut() {
    std::lock_guard lock(mu);
    io = nullptr;
  }
};

// What a completion carries back to the io_context, copied out of the C client's
// buffers on its completion thread.
struct Reply {
  int rc = ZOK;
  std::string data;
  Stat stat{};
  std::vector<std::string> strings;
  std::string path;
  std::vector<int> opErrors;  // multi: one per op
};

// One outstanding asynchronous request. Owned by the C client between the request
// and its completion (which the client calls exactly once, also on close).
struct Call {
  std::weak_ptr<Session::Impl> impl;
  std::shared_ptr<Outlet> outlet;
  std::function<void(Reply)> done;  // runs on the io_context if the session lives

  // Buffers of a multi-op, which must live until the completion.
  std::string stateBytes;
  std::string historyBytes;
  std::string statePath;
  std::string historyPrefix;
  std::vector<char> historyPathBuf = std::vector<char>(512);
  Stat setStat{};
  zoo_op_t ops[2]{};
  zoo_op_result_t results[2]{};
};

Call* callFromData(const void* data) { return static_cast<Call*>(const_cast<void*>(data)); }

void finish(Call* raw, Reply reply) {
  std::shared_ptr<Call> call(raw);
  std::shared_ptr<Outlet> outlet = call->outlet;
  outlet->post([call = std::move(call), reply = std::move(reply)]() mutable {
    if (auto alive = call->impl.lock()) call->done(std::move(reply));
  });
}

void onDataCompletion(int rc, const char* value, int len, const Stat* stat, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && value != nullptr && len > 0) r.data.assign(value, static_cast<size_t>(len));
  if (rc == ZOK && stat != nullptr) r.stat = *stat;
  finish(callFromData(data), std::move(r));
}

void onStatCompletion(int rc, const Stat* stat, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && stat != nullptr) r.stat = *stat;
  finish(callFromData(data), std::move(r));
}

void onStringsCompletion(int rc, const String_vector* strings, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && strings != nullptr) {
    for (int32_t i = 0; i < strings->count; ++i) r.strings.emplace_back(strings->data[i]);
  }
  finish(callFromData(data), std::move(r));
}

void onStringCompletion(int rc, const char* value, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && value != nullptr) r.path = value;
  finish(callFromData(data), std::move(r));
}

void onVoidCompletion(int rc, const void* data) {
  Reply r;
  r.rc = rc;
  finish(callFromData(data), std::move(r));
}

void onMultiCompletion(int rc, const void* data) {
  Call* call = callFromData(data);
  Reply r;
  r.rc = rc;
  for (const auto& res : call->results) r.opErrors.push_back(res.err);
  r.stat = call->setStat;
  r.path = call->historyPathBuf.data();
  finish(call, std::move(r));
}

// The global watcher's context: which handle generation the notifications belong to.
struct HandleCtx {
  std::weak_ptr<Session::Impl> impl;
  std::shared_ptr<Outlet> outlet;
  uint64_t generation = 0;
};

struct WatchNotice {
  uint64_t generation;
  int type;
  int state;
  std::string path;
};

void postWatch(HandleCtx* ctx, WatchNotice notice);

void onWatcherEvent(zhandle_t* /*zh*/, int type, int state, const char* path, void* context) {
  auto* ctx = static_cast<HandleCtx*>(context);
  if (ctx == nullptr) return;
  postWatch(ctx, WatchNotice{ctx->generation, type, state, path != nullptr ? path : ""});
}

const char* stateName(int state) {
  if (state == ZOO_CONNECTED_STATE) return "connected";
  if (state == ZOO_CONNECTING_STATE) return "connecting";
  if (state == ZOO_ASSOCIATING_STATE) return "associating";
  if (state == ZOO_EXPIRED_SESSION_STATE) return "expired";
  if (state == ZOO_AUTH_FAILED_STATE) return "auth-failed";
  if (state == ZOO_NOTCONNECTED_STATE) return "not-connected";
  if (state == ZOO_READONLY_STATE) return "read-only";
  return "unknown";
}

bool sameNode(const StateNode& a, const StateNode& b) {
  return a.exists == b.exists && a.version == b.version && a.data == b.data;
}

bool samePeers(const PeerList& a, const PeerList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].toJson() != b[i].toJson()) return false;
  }
  return true;
}

std::string peerIds(const PeerList& peers) {
  std::string out = "[";
  for (size_t i = 0; i < peers.size(); ++i) {
    if (i > 0) out += ",";
    out += peers[i].id;
  }
  return out + "]";
}

EpochMs nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class Session::Impl : public std::enable_shared_from_this<Session::Impl> {
 public:
  Impl(boost::asio::io_context& io, ZkOptions options, PeerIdentity self, EventCallback onEvent)
      : io_(io),
        options_(std::move(options)),
        layout_(options_.effectiveRoot()),
        self_(std::move(self)),
        onEvent_(std::move(onEvent)),
        log_(options_.logger ? options_.logger : spdlog::default_logger()),
        outlet_(std::make_shared<Outlet>()),
        resume_(options_.resume),
        reopenTimer_(io),
        abandonTimer_(io),
        setupRetryTimer_(io),
        leaseTimer_(io),
        rng_(std::random_device{}()) {}

  Result<bool> start() {
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

  void stop(detail::CloseMode mode) {
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

  void onWatch(const WatchNotice& n) {
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

  void putClusterState(const ClusterState& state, int32_t expectedVersion, WriteCallback done, std::string reason) {
    auto failNow = [&](std::string error) {
      log_->warn("zk: cluster-state write (expected version {}) refused: {}", expectedVersion, error);
      boost::asio::post(io_, [done = std::move(done), error = std::move(error)] {
        StateWriteFinished f;
        f.error = error;
        done(f);
      });
    };
    if (stopped_ || !started_) return failNow("the ZooKeeper session is not running");
    if (zh_ == nullptr || !connected_) return failNow("not connected to ZooKeeper (connection lost; retrying)");
    if (!initialized_) return failNow("the ZooKeeper session is not set up yet");
    if (pendingWrite_) return failNow("another cluster-state write is still in flight");
    if (expectedVersion < -1) return failNow("invalid expected version " + std::to_string(expectedVersion));

    auto call = newCall([this](Reply r) { onWriteReply(std::move(r)); });
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

    auto pending = std::make_unique<PendingWrite>();
    pending->id = ++writeCounter_;
    pending->expectedVersion = expectedVersion;
    pending->bytes = call->stateBytes;
    pending->done = std::move(done);
    pending->reason = reason;
    pending->deadline = std::make_unique<boost::asio::steady_timer>(io_);
    pendingWrite_ = std::move(pending);

    Call* raw = call.get();
    int rc = zoo_amulti(zh_, 2, raw->ops, raw->results, onMultiCompletion, call.release());
    ++requestsSent_;
    if (rc != ZOK) {
      // The client did not take the request: no completion will come.
      delete raw;
      completeWrite(failure("the write could not be sent: " + describeRc(rc)));
      return;
    }
    log_->info("zk: writing cluster state (expected version {}): {}", expectedVersion,
               reason.empty() ? "no reason given" : reason);
  }

  void setConnectionCallback(std::function<void(ConnectionChange)> onChange) { onConnection_ = std::move(onChange); }
  void setLeaseCallback(std::function<void(LeaseConfirmation)> onLease) { onLease_ = std::move(onLease); }

  void watchNode(const std::string& path, std::function<void(StateNode)> onChange) {
    watched_[path].onChange = std::move(onChange);
    if (initialized_ && connected_) refreshWatched(path);
  }

  void setDataState(std::optional<PeerDataState> data) {
    dataState_ = std::move(data);
    syncElectionData();
  }
  void setSessionCallback(std::function<void(SessionCredentials)> onSession) { onSession_ = std::move(onSession); }

  SessionStatus status() const {
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

  std::optional<SessionCredentials> credentials() const {
    if (zh_ == nullptr || sessionId_ == 0) return std::nullopt;
    const clientid_t* id = zoo_client_id(zh_);
    if (id == nullptr || id->client_id == 0) return std::nullopt;
    return SessionCredentials{id->client_id, std::string(id->passwd, sizeof id->passwd)};
  }

  boost::asio::io_context& io() { return io_; }

 private:
  struct PendingWrite {
    uint64_t id = 0;
    int32_t expectedVersion = -1;
    std::string bytes;
    std::string reason;
    WriteCallback done;
    bool unknown = false;    // the outcome was lost with the connection
    bool resolving = false;  // a read to resolve it is in flight
    std::unique_ptr<boost::asio::steady_timer> deadline;
  };

  // A re-read that can be asked for again while it runs: the request is remembered and
  // run once the current one finishes, so the last state is never lost.
  struct Refresh {
    uint64_t token = 0;
    bool inFlight = false;
    bool again = false;
    // Starts a re-read: its token, or nothing while one runs (then it runs again after).
    std::optional<uint64_t> start() {
      if (inFlight) {
        again = true;
        return std::nullopt;
      }
      inFlight = true;
      again = false;
      return token;
    }
  };
  struct WatchedNode {
    std::function<void(StateNode)> onChange;
    std::optional<StateNode> known;  // last delivered
    Refresh refresh;
  };
  std::map<std::string, WatchedNode> watched_;

  std::unique_ptr<Call> newCall(std::function<void(Reply)> done) {
    auto call = std::make_unique<Call>();
    call->impl = weak_from_this();
    call->outlet = outlet_;
    call->done = std::move(done);
    return call;
  }

  // Issues one request. `send` gets the Call's address to hand to the C client;
  // when the client refuses the request synchronously, the reply is delivered with
  // its error code (posted, so callers never re-enter).
  // Replies that belong to a lost session or an earlier handle are dropped.
  template <class Send>
  void request(std::function<void(Reply)> done, Send send) {
    auto call = newCall([this, epoch = epoch_, done = std::move(done)](Reply r) {
      if (epoch == epoch_ && !stopped_) done(std::move(r));
    });
    Call* raw = call.release();
    ++requestsSent_;
    int rc = zh_ == nullptr ? ZINVALIDSTATE : send(raw);
    if (rc != ZOK) {
      Reply r;
      r.rc = rc;
      finish(raw, std::move(r));
    }
  }

  // ---- the lease: leader-confirmed round trips ------------------------------------
  // A `sync` is forwarded by a follower to the leader and answered only once the leader
  // has answered it: a follower cut off from its leader keeps answering pings, but not
  // this. One at a time; a round trip stuck on such a follower simply confirms nothing.

  void scheduleLease() {
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

  void sendLease() {
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

  // ---- session lifecycle --------------------------------------------------------

  void openSession() {
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

  void resetSessionState() {
    connected_ = false;
    initialized_ = false;
    reportedLoss_ = false;  // the next ZkInitialized reports the new session
    stateChangedDuringSetup_ = false;
    activeChangedDuringSetup_ = false;
    sessionId_ = 0;
    electionNode_.clear();
    electionBytesSent_.clear();
    dataSyncInFlight_ = false;
    identities_.clear();
    dataStates_.clear();
    ++setupRun_;
    if (pendingWrite_) pendingWrite_->resolving = false;
    stateRefresh_ = Refresh{stateRefresh_.token + 1};
    activeRefresh_ = Refresh{activeRefresh_.token + 1};
    for (auto& [path, w] : watched_) w.refresh = Refresh{w.refresh.token + 1};
  }

  // The close runs later, off the loop. Pending completions then run (with ZCLOSING)
  // on the closer's thread; they only post, through the outlet. The watcher's context
  // lives until the handle is closed.
  void closeHandle(detail::CloseMode mode = detail::CloseMode::kEndSession) {
    if (zh_ == nullptr) return;
    zhandle_t* zh = zh_;
    zh_ = nullptr;
    connected_ = false;
    detail::closeLater(zh, mode, std::shared_ptr<HandleCtx>(std::move(handleCtx_)));
  }

  void scheduleReopen() {
    if (stopped_) return;
    auto delay = nextBackoff();
    log_->info("zk: opening a new session in {} ms", delay.count());
    reopenTimer_.expires_after(delay);
    reopenTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->openSession();
    });
  }

  std::chrono::milliseconds nextBackoff() {
    int64_t d = options_.backoffInitialMs;
    for (int i = 0; i < backoffAttempt_ && d < options_.backoffMaxMs; ++i) d *= 2;
    d = std::min<int64_t>(d, options_.backoffMaxMs);
    ++backoffAttempt_;
    std::uniform_int_distribution<int64_t> jitter(d / 2, d);
    return std::chrono::milliseconds(jitter(rng_));
  }

  void onSessionEvent(int state) {
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
        refreshState();
        refreshActive();
        refreshAllWatched();
        resolveUnknownWrite();
        syncElectionData();
        if (reportedLoss_) {
          reportedLoss_ = false;
          if (onConnection_) onConnection_(ConnectionChange{true, sessionId_, zoo_recv_timeout(zh_)});
        }
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

  // A session no server has accepted for a long while (twice its timeout, at least a
  // minute) has expired on the servers, or the ensemble was rebuilt: a new one refuses a
  // client that has seen a newer zxid than its own, and the C client would retry that
  // forever. A new handle (a new session) starts afresh. The minute leaves an ensemble
  // that restarts (and revives its sessions) the time to come back.
  void abandonLater() {
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

  void onSessionLost(const std::string& why) {
    noteError(why + "; the election node is gone; opening a new session");
    ++epoch_;  // drop what is still in flight for the lost session
    ++sessionsLost_;
    lastSessionLost_ = std::chrono::steady_clock::now();
    connected_ = false;
    initialized_ = false;
    reportedLoss_ = false;  // the next ZkInitialized reports the new session
    stateChangedDuringSetup_ = false;
    activeChangedDuringSetup_ = false;
    if (pendingWrite_) markWriteUnknown();
    closeHandle();
    scheduleReopen();
  }

  // ---- setup: parents, election node, first reads. Idempotent; re-run after a
  // connection loss interrupts it. ---------------------------------------------------

  void runSetup() {
    uint64_t run = ++setupRun_;
    log_->debug("zk: setting up session {} (run {})", sessionIdText(sessionId_), run);
    ensureNode(run, 0);
  }

  bool setupCurrent(uint64_t run) const { return run == setupRun_ && zh_ != nullptr && !stopped_; }

  // Handles a setup step's error: connection loss waits for the reconnection (which
  // re-runs setup); anything else retries the setup with back-off.
  void setupFailed(uint64_t run, const std::string& what, int rc) {
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

  void ensureNode(uint64_t run, size_t index) {
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

  // Adopts an election node this session already owns (a create whose reply was lost
  // with the connection), else creates one.
  void findElectionNode(uint64_t run) {
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

  void checkOwnedNode(uint64_t run, std::vector<std::string> candidates, size_t index) {
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

  void createElectionNode(uint64_t run) {
    std::string prefix = layout_.electionPrefix(self_.id);
    std::string bytes = electionBytes();
    request(
        [this, run, bytes](Reply r) {
          if (!setupCurrent(run)) return;
          if (r.rc != ZOK) return setupFailed(run, "creating the election node", r.rc);
          electionNode_ = r.path;
          electionBytesSent_ = bytes;
          log_->info("zk: joined the election as {}", electionNode_);
          readInitial(run);
        },
        [&](Call* c) {
          return zoo_acreate(zh_, prefix.c_str(), bytes.data(), static_cast<int>(bytes.size()),
                             detail::aclFor(options_), ZOO_EPHEMERAL | ZOO_SEQUENCE, onStringCompletion, c);
        });
  }

  void readInitial(uint64_t run) {
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
        log_->info("zk: initialized: state {} (version {}), active peers {}",
                   state.exists ? "present" : "absent", state.version, peerIds(active));
        onEvent_(ZkInitialized{state, active, data, resumed_});
        syncElectionData();
        resolveUnknownWrite();
        // A watch that fired during setup may have been for data newer than what we read.
        if (std::exchange(stateChangedDuringSetup_, false)) refreshState();
        if (std::exchange(activeChangedDuringSetup_, false)) refreshActive();
        refreshAllWatched();
      });
    });
  }

  // ---- reads ---------------------------------------------------------------------

  // Reads the state node and leaves a watch on it: a data watch when it exists, an
  // existence watch when it does not.
  void readState(int attempt, std::function<void(int, StateNode)> done) {
    readWatchedNode(layout_.state(), attempt, std::move(done));
  }

  void readWatchedNode(const std::string& path, int attempt, std::function<void(int, StateNode)> done) {
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

  // Lists the election children with a watch, reads the identities not yet known, and
  // returns the peers in session order.
  void readActive(std::function<void(int, PeerList, PeerDataStates)> done) {
    std::string dir = layout_.election();
    request(
        [this, done = std::move(done)](Reply r) mutable {
          if (r.rc != ZOK) return done(r.rc, PeerList{}, PeerDataStates{});
          auto names = sortElectionNodes(std::move(r.strings));
          std::map<std::string, std::optional<PeerIdentity>> kept;
          std::map<std::string, PeerDataState> keptData;
          for (const auto& n : names) {
            if (auto it = identities_.find(n); it != identities_.end()) kept.insert(*it);
            if (auto it = dataStates_.find(n); it != dataStates_.end() && kept.count(n)) keptData.insert(*it);
          }
          identities_ = std::move(kept);
          dataStates_ = std::move(keptData);
          readIdentities(std::move(names), 0, std::move(done));
        },
        [&](Call* c) { return zoo_aget_children(zh_, dir.c_str(), 1, onStringsCompletion, c); });
  }

  void readIdentities(std::vector<std::string> names, size_t index,
                      std::function<void(int, PeerList, PeerDataStates)> done) {
    while (index < names.size() && identities_.count(names[index])) ++index;
    if (index == names.size()) {
      PeerList peers;
      PeerDataStates data;
      for (const auto& n : names) {
        auto it = identities_.find(n);
        if (it == identities_.end() || !it->second || containsPeer(peers, it->second->id)) continue;
        peers.push_back(*it->second);
        if (auto d = dataStates_.find(n); d != dataStates_.end()) data[it->second->id] = d->second;
      }
      return done(ZOK, dedupeById(peers), std::move(data));
    }
    if (zh_ == nullptr) return done(ZCLOSING, PeerList{}, PeerDataStates{});
    std::string name = names[index];
    std::string path = layout_.election() + "/" + name;
    request(
        [this, names = std::move(names), index, name, done = std::move(done)](Reply r) mutable {
          if (r.rc == ZNONODE) {
            // Gone between the listing and the read: the child watch fires again.
            names.erase(names.begin() + static_cast<std::ptrdiff_t>(index));
            return readIdentities(std::move(names), index, std::move(done));
          }
          if (r.rc != ZOK) return done(r.rc, PeerList{}, PeerDataStates{});
          auto parsed = nlohmann::json::parse(r.data, nullptr, false);
          dataStates_.erase(name);
          if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("data")) {
            auto data = PeerDataState::fromJson(parsed["data"]);
            if (data) {
              dataStates_[name] = *data;
            } else {
              log_->warn("zk: election node {} holds an invalid data state ({}); ignored", name, data.error());
            }
          }
          auto identity = parsed.is_discarded() ? Result<PeerIdentity>(Error{"not JSON"})
                                                : PeerIdentity::fromJson(parsed, "election node " + name);
          if (!identity) {
            log_->warn("zk: election node {} holds no valid identity ({}); it is not counted as a peer", name,
                       identity.error());
            identities_[name] = std::nullopt;
          } else {
            identities_[name] = identity.value();
          }
          readIdentities(std::move(names), index + 1, std::move(done));
        },
        // Watched: a peer publishes its data state by changing its node's data.
        [&](Call* c) { return zoo_aget(zh_, path.c_str(), 1, onDataCompletion, c); });
  }

  // This peer's election node: its identity, and its data state while it publishes one.
  std::string electionBytes() const {
    nlohmann::json j = self_.toJson();
    if (dataState_) j["data"] = dataState_->toJson();
    return j.dump();
  }

  // Brings this peer's election node up to date with the data state to publish; tried
  // again after setup and on each reconnection while it differs.
  void syncElectionData() {
    if (zh_ == nullptr || !connected_ || !initialized_ || electionNode_.empty() || dataSyncInFlight_) return;
    std::string bytes = electionBytes();
    if (bytes == electionBytesSent_) return;
    dataSyncInFlight_ = true;
    std::string path = electionNode_;
    request(
        [this, bytes](Reply r) {
          dataSyncInFlight_ = false;
          if (r.rc != ZOK) {
            log_->info("zk: publishing this peer's data state failed ({}); tried again on reconnection",
                       describeRc(r.rc));
            return;
          }
          electionBytesSent_ = bytes;
          log_->info("zk: published this peer's data state: {}", dataState_ ? dataState_->describe() : "none");
          syncElectionData();  // changed again meanwhile
        },
        [&](Call* c) {
          return zoo_aset(zh_, path.c_str(), bytes.data(), static_cast<int>(bytes.size()), -1, onStatCompletion, c);
        });
  }

  // ---- watches -------------------------------------------------------------------

  void refreshAllWatched() {
    for (const auto& [path, w] : watched_) refreshWatched(path);
  }

  // Like refreshState, for a node watched with watchNode: delivered when it differs.
  void refreshWatched(const std::string& path) {
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

  void refreshState() {
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
      } else {
        log_->info("zk: re-reading the state failed ({}); retried on reconnection", describeRc(rc));
      }
      if (stateRefresh_.again && connected_) refreshState();
    });
  }

  void refreshActive() {
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
        if (!samePeers(active, knownActive_) || data != knownData_) {
          log_->info("zk: active peers changed: {} -> {}{}", peerIds(knownActive_), peerIds(active),
                     data != knownData_ ? " (published data states changed)" : "");
          knownActive_ = active;
          knownData_ = data;
          onEvent_(ActivePeersChanged{active, data});
        }
      } else {
        log_->info("zk: re-reading the election failed ({}); retried on reconnection", describeRc(rc));
      }
      if (activeRefresh_.again && connected_) refreshActive();
    });
  }

  // ---- writes --------------------------------------------------------------------

  static StateWriteFinished failure(std::string error, bool lostRace = false) {
    StateWriteFinished f;
    f.error = std::move(error);
    f.lostRace = lostRace;
    return f;
  }

  void onWriteReply(Reply r) {
    if (!pendingWrite_ || pendingWrite_->unknown) return;  // resolved another way already
    PendingWrite& w = *pendingWrite_;
    if (r.rc == ZOK) {
      StateWriteFinished f;
      f.ok = true;
      f.newVersion = w.expectedVersion == -1 ? 0 : r.stat.version;
      log_->info("zk: wrote cluster state version {} (history {})", f.newVersion, r.path);
      return completeWrite(f);
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

  void markWriteUnknown() {
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

  // The outcome of a write whose answer was lost, from the state read again. The read
  // follows a sync, so that a server behind the leader cannot show a state from before
  // the write. Applied means: the bytes written, at a version the write produced (above
  // the one it expected). A rewrite that changes nothing but the version (a confirmation,
  // a settle write) has the same bytes as the state it expected, so the bytes alone
  // would report a write that never reached ZooKeeper as applied.
  void resolveUnknownWrite() {
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

  // Whether the resolution of write `id` goes on after reply `r`; if not, it is tried
  // again at the next reconnection or ends at the deadline.
  bool outcomeReadable(uint64_t id, const Reply& r) {
    if (!pendingWrite_ || pendingWrite_->id != id) return false;
    if (r.rc == ZOK || r.rc == ZNONODE) return true;
    pendingWrite_->resolving = false;
    log_->info("zk: could not check the write's outcome yet ({})", describeRc(r.rc));
    return false;
  }

  void resolveFromRead(uint64_t id, const Reply& r) {
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

  void completeWrite(StateWriteFinished result) {
    if (!pendingWrite_) return;
    auto w = std::move(pendingWrite_);
    w->deadline->cancel();
    if (!result.ok) lastError_ = result.error;
    w->done(std::move(result));
  }

  void noteError(std::string message) {
    log_->error("zk: {}", message);
    lastError_ = std::move(message);
  }

  boost::asio::io_context& io_;
  ZkOptions options_;
  Layout layout_;
  PeerIdentity self_;
  std::optional<PeerDataState> dataState_;  // published in the election node
  std::string electionBytesSent_;           // what the election node holds, as far as known
  bool dataSyncInFlight_ = false;
  EventCallback onEvent_;
  std::function<void(ConnectionChange)> onConnection_;
  std::function<void(SessionCredentials)> onSession_;
  std::function<void(LeaseConfirmation)> onLease_;
  bool leaseInFlight_ = false;
  std::chrono::steady_clock::time_point openedAt_{};  // the current handle's opening
  uint64_t leaseEpoch_ = 0;
  bool reportedLoss_ = false;  // a loss was reported and no regain yet
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<Outlet> outlet_;
  std::optional<SessionCredentials> resume_;  // until the first handle is opened
  int64_t reportedSessionId_ = 0;             // the last session given to onSession_
  bool resumed_ = false;
  boost::asio::steady_timer reopenTimer_;
  boost::asio::steady_timer abandonTimer_;  // a session no server accepts any more
  boost::asio::steady_timer setupRetryTimer_;
  boost::asio::steady_timer leaseTimer_;  // the lease's round trips
  std::mt19937_64 rng_;

  bool started_ = false;
  bool stopped_ = false;
  zhandle_t* zh_ = nullptr;
  std::unique_ptr<HandleCtx> handleCtx_;
  bool stateChangedDuringSetup_ = false;
  bool activeChangedDuringSetup_ = false;
  uint64_t generation_ = 0;  // handles opened; tags watcher notifications
  uint64_t epoch_ = 0;       // bumped when a session is lost or a handle opened; tags replies
  int sessionsOpened_ = 0;
  int backoffAttempt_ = 0;
  bool connected_ = false;
  bool initialized_ = false;
  int64_t sessionId_ = 0;
  uint64_t setupRun_ = 0;
  std::string electionNode_;
  std::string lastError_;
  uint64_t requestsSent_ = 0;
  int sessionsLost_ = 0;
  std::chrono::steady_clock::time_point lastSessionLost_{};

  StateNode knownState_;
  PeerList knownActive_;
  PeerDataStates knownData_;
  std::map<std::string, std::optional<PeerIdentity>> identities_;  // election node -> identity
  std::map<std::string, PeerDataState> dataStates_;                // election node -> published data
  Refresh stateRefresh_;
  Refresh activeRefresh_;

  std::unique_ptr<PendingWrite> pendingWrite_;
  uint64_t writeCounter_ = 0;
};

namespace {

void postWatch(HandleCtx* ctx, WatchNotice notice) {
  ctx->outlet->post([impl = ctx->impl, notice = std::move(notice)] {
    if (auto self = impl.lock()) self->onWatch(notice);
  });
}

}  // namespace

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
  impl_->putClusterState(state, expectedVersion, std::move(done), std::move(reason));
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

}  // namespace dugong::zk
