// zk::Session's implementation, shared by zk/session.cc (requests, writes, the lease,
// watches, status) and zk/session_setup.cc (opening a session, its setup, reading the
// state and the election). Internal to zk/.
#pragma once

#include "zk/session.h"
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <unordered_set>
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

// What the C client's threads hand back to the Session's loop, and small helpers.
namespace session_internal {


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
// Requests alive (sent, or answered and not yet delivered), for the tests.
inline std::atomic<int64_t> callsAlive{0};

struct Call;

// The requests one handle holds: sent, their completion not yet called. The C client
// calls each completion once, except those it queues as the handle closes: its
// completion thread has ended by then, and zookeeper_close frees the handle with them
// still queued (ZOOKEEPER-2894, ZOOKEEPER-3868; libzookeeper-mt 3.8). Once the close
// returned, no thread of that handle can call back: what is left is freed then.
class OutstandingCalls {
 public:
  void add(Call* call) {
    std::lock_guard lock(mu_);
    calls_.insert(call);
  }
  // The completion was called: the request is the caller's again.
  void remove(Call* call) {
    std::lock_guard lock(mu_);
    calls_.erase(call);
  }
  // After zookeeper_close returned.
  void freeAll();

 private:
  std::mutex mu_;
  std::unordered_set<Call*> calls_;
};

struct Call {
  Call() { ++callsAlive; }
  ~Call() {
    --callsAlive;
    if (outstanding) outstanding->remove(this);  // one never handed to the C client
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  std::weak_ptr<Session::Impl> impl;
  std::shared_ptr<Outlet> outlet;
  std::shared_ptr<OutstandingCalls> outstanding;  // of the handle it was sent on, if any
  std::function<void(Reply)> done;  // runs on the io_context if the session lives

  // Buffers of a multi-op, which must live until the completion: the state's set (or
  // create), its history record, then the checks of election nodes.
  std::string stateBytes;
  std::string historyBytes;
  std::string statePath;
  std::string historyPrefix;
  std::vector<std::string> checkPaths;
  std::vector<std::string> checkPeers;  // the peer each check is of
  std::vector<char> historyPathBuf = std::vector<char>(512);
  Stat setStat{};
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
};

inline void OutstandingCalls::freeAll() {
  std::unordered_set<Call*> left;
  {
    std::lock_guard lock(mu_);
    left.swap(calls_);
  }
  for (Call* c : left) delete c;
}

inline Call* callFromData(const void* data) { return static_cast<Call*>(const_cast<void*>(data)); }

// The C client gave the request back (its completion, or it refused to send it).
inline std::unique_ptr<Call> takeBack(Call* raw) {
  if (raw->outstanding) raw->outstanding->remove(raw);
  raw->outstanding.reset();  // no longer the handle's to free
  return std::unique_ptr<Call>(raw);
}

inline void finish(Call* raw, Reply reply) {
  std::shared_ptr<Call> call = takeBack(raw);
  std::shared_ptr<Outlet> outlet = call->outlet;
  outlet->post([call = std::move(call), reply = std::move(reply)]() mutable {
    if (auto alive = call->impl.lock()) call->done(std::move(reply));
  });
}

inline void onDataCompletion(int rc, const char* value, int len, const Stat* stat, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && value != nullptr && len > 0) r.data.assign(value, static_cast<size_t>(len));
  if (rc == ZOK && stat != nullptr) r.stat = *stat;
  finish(callFromData(data), std::move(r));
}

inline void onStatCompletion(int rc, const Stat* stat, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && stat != nullptr) r.stat = *stat;
  finish(callFromData(data), std::move(r));
}

inline void onStringsCompletion(int rc, const String_vector* strings, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && strings != nullptr) {
    for (int32_t i = 0; i < strings->count; ++i) r.strings.emplace_back(strings->data[i]);
  }
  finish(callFromData(data), std::move(r));
}

inline void onStringCompletion(int rc, const char* value, const void* data) {
  Reply r;
  r.rc = rc;
  if (rc == ZOK && value != nullptr) r.path = value;
  finish(callFromData(data), std::move(r));
}

inline void onVoidCompletion(int rc, const void* data) {
  Reply r;
  r.rc = rc;
  finish(callFromData(data), std::move(r));
}

inline void onMultiCompletion(int rc, const void* data) {
  Call* call = callFromData(data);
  Reply r;
  r.rc = rc;
  for (const auto& res : call->results) r.opErrors.push_back(res.err);
  r.stat = call->setStat;
  r.path = call->historyPathBuf.data();
  finish(call, std::move(r));
}

// The global watcher's context: which handle generation the notifications belong to.
// The closer holds it until zookeeper_close returned (handle_closer.h); a handle left
// open keeps it for ever.
struct HandleCtx {
  ~HandleCtx() { outstanding->freeAll(); }

  std::weak_ptr<Session::Impl> impl;
  std::shared_ptr<Outlet> outlet;
  uint64_t generation = 0;
  std::shared_ptr<OutstandingCalls> outstanding = std::make_shared<OutstandingCalls>();
};

struct WatchNotice {
  uint64_t generation;
  int type;
  int state;
  std::string path;
};

void postWatch(HandleCtx* ctx, WatchNotice notice);

inline void onWatcherEvent(zhandle_t* /*zh*/, int type, int state, const char* path, void* context) {
  auto* ctx = static_cast<HandleCtx*>(context);
  if (ctx == nullptr) return;
  postWatch(ctx, WatchNotice{ctx->generation, type, state, path != nullptr ? path : ""});
}

inline const char* stateName(int state) {
  if (state == ZOO_CONNECTED_STATE) return "connected";
  if (state == ZOO_CONNECTING_STATE) return "connecting";
  if (state == ZOO_ASSOCIATING_STATE) return "associating";
  if (state == ZOO_EXPIRED_SESSION_STATE) return "expired";
  if (state == ZOO_AUTH_FAILED_STATE) return "auth-failed";
  if (state == ZOO_NOTCONNECTED_STATE) return "not-connected";
  if (state == ZOO_READONLY_STATE) return "read-only";
  return "unknown";
}

inline bool sameNode(const StateNode& a, const StateNode& b) {
  return a.exists == b.exists && a.version == b.version && a.data == b.data;
}

inline bool samePeers(const PeerList& a, const PeerList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].toJson() != b[i].toJson()) return false;
  }
  return true;
}

inline EpochMs nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace session_internal
using namespace session_internal;  // NOLINT(google-build-using-namespace): an internal header

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

  Result<bool> start();

  void stop(detail::CloseMode mode);

  void onWatch(const WatchNotice& n);

  void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::vector<ElectionNodeCheck>& checks,
                       WriteCallback done, std::string reason);

  void setConnectionCallback(std::function<void(ConnectionChange)> onChange) { onConnection_ = std::move(onChange); }
  void setLeaseCallback(std::function<void(LeaseConfirmation)> onLease) { onLease_ = std::move(onLease); }

  void watchNode(const std::string& path, std::function<void(StateNode)> onChange);

  void setDataState(std::optional<PeerDataState> data);
  void setStreaming(bool streams);
  void publishReport(std::optional<TakeoverReport> report, std::function<void(ReportPublished)> done);
  void setSessionCallback(std::function<void(SessionCredentials)> onSession) { onSession_ = std::move(onSession); }

  SessionStatus status() const;

  std::optional<SessionCredentials> credentials() const;

  boost::asio::io_context& io() { return io_; }

 private:
  struct PendingWrite {
    uint64_t id = 0;
    int32_t expectedVersion = -1;
    std::string bytes;
    std::string reason;
    std::vector<std::string> checkPeers;  // the peers whose election nodes it checks, in order
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

  std::unique_ptr<Call> newCall(std::function<void(Reply)> done);

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

  void scheduleLease();

  void sendLease();

  // ---- session lifecycle --------------------------------------------------------

  void openSession();

  void resetSessionState();

  // The close runs later, off the loop. Pending completions then run (with ZCLOSING)
  // on the closer's thread; they only post, through the outlet. The watcher's context
  // lives until the handle is closed.
  void closeHandle(detail::CloseMode mode = detail::CloseMode::kEndSession);

  void scheduleReopen();

  std::chrono::milliseconds nextBackoff();

  void onSessionEvent(int state);

  // A session no server has accepted for a long while (twice its timeout, at least a
  // minute) has expired on the servers, or the ensemble was rebuilt: a new one refuses a
  // client that has seen a newer zxid than its own, and the C client would retry that
  // forever. A new handle (a new session) starts afresh. The minute leaves an ensemble
  // that restarts (and revives its sessions) the time to come back.
  void abandonLater();

  void onSessionLost(const std::string& why);

  // ---- setup: parents, election node, first reads. Idempotent; re-run after a
  // connection loss interrupts it. ---------------------------------------------------

  void runSetup();

  bool setupCurrent(uint64_t run) const { return run == setupRun_ && zh_ != nullptr && !stopped_; }

  // Handles a setup step's error: connection loss waits for the reconnection (which
  // re-runs setup); anything else retries the setup with back-off.
  void setupFailed(uint64_t run, const std::string& what, int rc);

  void ensureNode(uint64_t run, size_t index);

  // Adopts an election node this session already owns (a create whose reply was lost
  // with the connection), else creates one.
  void findElectionNode(uint64_t run);

  void checkOwnedNode(uint64_t run, std::vector<std::string> candidates, size_t index);

  void createElectionNode(uint64_t run);

  void readInitial(uint64_t run);

  // ---- reads ---------------------------------------------------------------------

  // Reads the state node and leaves a watch on it: a data watch when it exists, an
  // existence watch when it does not.
  void readState(int attempt, std::function<void(int, StateNode)> done);

  void readWatchedNode(const std::string& path, int attempt, std::function<void(int, StateNode)> done);

  // Lists the election children with a watch, reads the identities not yet known, and
  // returns the peers in session order.
  void readActive(std::function<void(int, PeerList, PeerDataStates)> done);

  void readIdentities(std::vector<std::string> names, size_t index,
                      std::function<void(int, PeerList, PeerDataStates)> done) {
    while (index < names.size() && identities_.count(names[index])) ++index;
    if (index == names.size()) {
      PeerList peers;
      PeerDataStates data;
      std::set<std::string> notStreaming;
      TakeoverReports reports;
      std::map<std::string, std::string> nodeOfPeer;
      for (const auto& n : names) {
        auto it = identities_.find(n);
        if (it == identities_.end() || !it->second || containsPeer(peers, it->second->id)) continue;
        peers.push_back(*it->second);
        nodeOfPeer[it->second->id] = n;
        if (auto d = dataStates_.find(n); d != dataStates_.end()) data[it->second->id] = d->second;
        if (notStreamingNodes_.count(n)) notStreaming.insert(it->second->id);
        if (auto r = reportNodes_.find(n); r != reportNodes_.end()) reports[it->second->id] = r->second;
      }
      notStreaming_ = std::move(notStreaming);
      reports_ = std::move(reports);
      nodeOfPeer_ = std::move(nodeOfPeer);
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
          notStreamingNodes_.erase(name);
          readReport(name, parsed, r);
          if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("streaming") &&
              parsed["streaming"].is_boolean() && !parsed["streaming"].get<bool>()) {
            notStreamingNodes_.insert(name);
          }
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

  // A takeover report in election node `name` as read (`r`: its data and version), noted
  // with the node's data version; this peer's own node also tells what it holds.
  void readReport(const std::string& name, const nlohmann::json& parsed, const Reply& r);
  // The answer to the publication of the report that waits for one, posted.
  void answerReport(ReportPublished answer);

  // This peer's election node: its identity, its data state while it publishes one,
  // whether it streams, and its takeover report while one stands.
  std::string electionBytes() const;

  // Brings this peer's election node up to date with the data state to publish; tried
  // again after setup and on each reconnection while it differs.
  void syncElectionData();

  // ---- watches -------------------------------------------------------------------

  void refreshAllWatched();

  // Like refreshState, for a node watched with watchNode: delivered when it differs.
  void refreshWatched(const std::string& path);

  void refreshState();
  // The regain of the connection, owed since the reconnection, once the state was read.
  void reportRegainIfOwed();

  void refreshActive();

  // ---- writes --------------------------------------------------------------------

  static StateWriteFinished failure(std::string error, bool lostRace = false);

  void onWriteReply(Reply r);

  void markWriteUnknown();

  // The outcome of a write whose answer was lost, from the state read again. The read
  // follows a sync, so that a server behind the leader cannot show a state from before
  // the write. Applied means: the bytes written, at a version the write produced (above
  // the one it expected). A rewrite that changes nothing but the version (a confirmation,
  // a settle write) has the same bytes as the state it expected, so the bytes alone
  // would report a write that never reached ZooKeeper as applied.
  void resolveUnknownWrite();

  // Whether the resolution of write `id` goes on after reply `r`; if not, it is tried
  // again at the next reconnection or ends at the deadline.
  bool outcomeReadable(uint64_t id, const Reply& r);

  void resolveFromRead(uint64_t id, const Reply& r);

  void completeWrite(StateWriteFinished result);

  void noteError(std::string message);

  boost::asio::io_context& io_;
  ZkOptions options_;
  Layout layout_;
  PeerIdentity self_;
  std::optional<PeerDataState> dataState_;  // published in the election node
  std::optional<bool> streaming_;           // published in the election node
  std::optional<TakeoverReport> report_;    // published in the election node
  // This run published a report (or withdrew one): until then, the report and the
  // streaming flag a re-attached node holds are kept (readReport).
  bool reportTold_ = false;
  std::function<void(ReportPublished)> reportDone_;  // the publication waiting for its answer
  std::string electionBytesSent_;           // what the election node holds, as far as known
  int32_t electionVersion_ = -1;            // the version at which it holds them
  bool dataSyncInFlight_ = false;
  EventCallback onEvent_;
  std::function<void(ConnectionChange)> onConnection_;
  std::function<void(SessionCredentials)> onSession_;
  std::function<void(LeaseConfirmation)> onLease_;
  bool leaseInFlight_ = false;
  std::chrono::steady_clock::time_point openedAt_{};  // the current handle's opening
  uint64_t leaseEpoch_ = 0;
  bool reportedLoss_ = false;  // a loss was reported and no regain yet
  bool regainOwed_ = false;    // reconnected after a reported loss: reported once the state is read
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
  // Election nodes that publish "streaming": false, and the peers they belong to as of
  // the last readIdentities (the notStreaming of the events it leads to).
  std::set<std::string> notStreamingNodes_;
  std::set<std::string> notStreaming_;
  std::set<std::string> knownNotStreaming_;
  std::map<std::string, PeerDataState> dataStates_;                // election node -> published data
  std::map<std::string, TakeoverReport> reportNodes_;              // election node -> its report
  // As of the last readIdentities: the present peers' reports, and each peer's election
  // node (the one its identity and reports are read from: the first in session order).
  TakeoverReports reports_;
  TakeoverReports knownReports_;
  std::map<std::string, std::string> nodeOfPeer_;
  Refresh stateRefresh_;
  Refresh activeRefresh_;

  std::unique_ptr<PendingWrite> pendingWrite_;
  uint64_t writeCounter_ = 0;
};

}  // namespace dugong::zk
