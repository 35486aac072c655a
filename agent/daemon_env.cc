#include "agent/daemon_env.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/failsafe_message.h"
#include "ops/http_client.h"
#include "agent/logging.h"

namespace dugong::agent {
namespace {

// A timer due at a boot time: armed on a steady timer for the time left, and armed
// again by the clock after a suspend (AsioClock::Timers).
class AsioTimer : public driver::Timer {
 public:
  AsioTimer(boost::asio::io_context& io, std::shared_ptr<AsioClock::Timers> timers);
  ~AsioTimer() override;
  void start(int64_t delayMs, std::function<void()> fired) override;
  void cancel() override;
  // Armed again for the time left until its due boot time at `nowMs` (none: nothing).
  void rearm(int64_t nowMs);

 private:
  struct Armed {
    std::function<void()> fired;
    int64_t dueMs = 0;  // boot time
  };
  void wait(int64_t delayMs);

  boost::asio::steady_timer timer_;
  std::shared_ptr<AsioClock::Timers> timers_;
  std::shared_ptr<Armed> armed_;  // the pending start; its handler holds it weakly
};

void noteGeneration(const StateNode& node) {
  if (!node.exists) return;
  const auto j = nlohmann::json::parse(node.data, nullptr, false);
  if (j.is_object() && j.contains("generation") && j["generation"].is_number_integer()) {
    setLogGeneration(j["generation"].get<int64_t>());
  }
}

}  // namespace

class AsioClock::Timers {
 public:
  std::set<AsioTimer*> live;
  std::shared_ptr<SuspendTracker> clock;  // the boot time they are due at
};

AsioClock::AsioClock(boost::asio::io_context& io, std::shared_ptr<SuspendTracker> suspends)
    : io_(io), suspends_(std::move(suspends)), timers_(std::make_shared<Timers>(Timers{{}, suspends_})) {}

EpochMs AsioClock::wallMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t AsioClock::monotonicMs() const {
  checkForSuspend();
  return suspends_->bootNowMs();
}

void AsioClock::checkForSuspend() const {
  const int64_t suspendedMs = suspends_->sample();
  if (suspendedMs == 0) return;
  spdlog::warn("the host was suspended for about {} ms (CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC): every deadline "
               "is checked again now, and a lease or promise it ran past has ended",
               suspendedMs);
  // On the loop, where the timers live (a reading of the clock may come from elsewhere).
  boost::asio::post(io_, [timers = timers_] {
    const int64_t now = timers->clock->bootNowMs();
    for (AsioTimer* t : std::vector<AsioTimer*>(timers->live.begin(), timers->live.end())) t->rearm(now);
  });
}

std::unique_ptr<driver::Timer> AsioClock::newTimer() { return std::make_unique<AsioTimer>(io_, timers_); }

void AsioClock::post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

AsioTimer::AsioTimer(boost::asio::io_context& io, std::shared_ptr<AsioClock::Timers> timers)
    : timer_(io), timers_(std::move(timers)) {
  timers_->live.insert(this);
}

AsioTimer::~AsioTimer() { timers_->live.erase(this); }

void AsioTimer::start(int64_t delayMs, std::function<void()> fired) {
  armed_ = std::make_shared<Armed>(Armed{std::move(fired), timers_->clock->bootNowMs() + delayMs});
  wait(delayMs);
}

void AsioTimer::cancel() {
  armed_.reset();
  timer_.cancel();
}

void AsioTimer::rearm(int64_t nowMs) {
  if (armed_ && armed_->fired) wait(std::max<int64_t>(armed_->dueMs - nowMs, 0));
}

void AsioTimer::wait(int64_t delayMs) {
  timer_.expires_after(std::chrono::milliseconds(delayMs));  // cancels the earlier wait
  timer_.async_wait([armed = std::weak_ptr<Armed>(armed_)](const boost::system::error_code& ec) {
    auto a = armed.lock();
    if (ec || !a || !a->fired) return;
    std::exchange(a->fired, nullptr)();
  });
}

ZkCoordinator::ZkCoordinator(boost::asio::io_context& io, zk::ZkOptions options, PeerIdentity self,
                             const AsioClock& clock)
    : io_(io), options_(std::move(options)), self_(std::move(self)), clock_(clock) {}

ZkCoordinator::~ZkCoordinator() = default;

void ZkCoordinator::keepSessionAcrossRestarts(std::optional<zk::SessionCredentials> resume,
                                              std::function<void(zk::SessionCredentials)> onNewSession) {
  resume_ = std::move(resume);
  onNewSession_ = std::move(onNewSession);
}

Result<bool> ZkCoordinator::join(driver::CoordinatorCallbacks callbacks) {
  leave();
  // Every log line from here on carries the generation of the last cluster state seen,
  // set before the state machine is stepped with it.
  replication_->step = nullptr;
  deliver_ = callbacks.onEvent;
  auto onEvent = [this, onEvent = std::move(callbacks.onEvent), delivery = replication_](Event event) {
    const auto* init = std::get_if<ZkInitialized>(&event);
    const auto* changed = std::get_if<ClusterStateChanged>(&event);
    if (init) noteGeneration(init->state);
    if (changed) noteGeneration(changed->state);
    const bool newsOfTheState = init || changed;
    if (newsOfTheState) followSource(init ? init->state : changed->state);
    onEvent(std::move(event));
    if (!newsOfTheState) return;
    if (!delivery->step) delivery->step = onEvent;
    if (delivery->wanted) onEvent(*delivery->wanted);
    if (sourceSeen_) onEvent(*sourceSeen_);
  };
  zk::ZkOptions options = options_;
  options.resume = std::exchange(resume_, std::nullopt);  // a rejoin after a withdrawal opens a new one
  session_ = std::make_unique<zk::Session>(io_, options, self_, std::move(onEvent));
  if (onNewSession_) session_->setSessionCallback(onNewSession_);
  session_->setDataState(dataState_);
  if (streaming_) session_->setStreaming(*streaming_);
  for (const auto& [path, onChange] : watched_) session_->watchNode(path, onChange);
  if (callbacks.onConnection) {
    session_->setConnectionCallback([onConnection = std::move(callbacks.onConnection)](zk::ConnectionChange c) {
      onConnection(driver::CoordinatorConnection{c.connected, c.sessionId, c.sessionTimeoutMs});
    });
  }
  if (callbacks.onLease && options.lease) {
    session_->setLeaseCallback([onLease = std::move(callbacks.onLease), &clock = clock_](zk::LeaseConfirmation l) {
      // The client dates the round trip on the steady clock; the driver's is boot time.
      const int64_t sentAtMs = clock.bootOfSteadyMs(
          std::chrono::duration_cast<std::chrono::milliseconds>(l.sentAt.time_since_epoch()).count());
      onLease(driver::CoordinatorLease{sentAtMs, l.sessionId, l.sessionTimeoutMs, l.intervalMs});
    });
  }
  if (auto ok = session_->start(); !ok) {
    session_.reset();
    return ok;
  }
  return true;
}

void ZkCoordinator::watchNode(const std::string& path, std::function<void(StateNode)> onChange) {
  watched_.emplace_back(path, onChange);
  if (session_) session_->watchNode(path, std::move(onChange));
}

void ZkCoordinator::followSource(const StateNode& node) {
  std::optional<StandbySource> source;
  if (node.exists) {
    auto state = ClusterState::parse(node.data, ClusterState::Formats::kAll);
    if (state && state->standby && state->standby->source.kind == SourceKind::kDugong) source = state->standby->source;
  }
  if (sourceWatch_ && source && sourceWatch_->source() == *source) return;
  std::erase_if(retiredSourceWatches_, [](const auto& w) { return w->ended(); });
  if (sourceWatch_) {
    spdlog::info("no longer reading the standby source {}", sourceWatch_->source().describe());
    sourceWatch_->stop();
    retiredSourceWatches_.push_back(std::move(sourceWatch_));
  }
  sourceSeen_.reset();
  if (!source) return;
  spdlog::info("reading the standby source {} (read-only, once a second)", source->describe());
  SourceObserved named;
  named.cluster = options_.cluster;
  named.chroot = options_.chroot;
  named.root = options_.effectiveRoot();
  std::weak_ptr<int> alive = alive_;
  sourceWatch_ = std::make_unique<zk::SourceWatch>(
      *source, std::nullopt, 1000, [this, alive, named, io = &io_](SourceObservation seen) {
        boost::asio::post(*io, [this, alive, named, seen = std::move(seen)]() mutable {
          if (alive.expired()) return;
          named.seen = std::move(seen);
          sourceSeen_ = named;
          if (deliver_) deliver_(named);
        });
      });
}

void ZkCoordinator::publishDataState(const std::optional<PeerDataState>& data) {
  dataState_ = data;
  if (session_) session_->setDataState(data);
}

void ZkCoordinator::publishStreaming(bool streams) {
  streaming_ = streams;
  if (session_) session_->setStreaming(streams);
}

void ZkCoordinator::deliverReplicationWanted(ReplicationWanted wanted) {
  replication_->wanted = wanted;
  if (!replication_->step) return;  // stepped with the next news of the state
  // Posted: never stepped from inside another step of the state machine.
  boost::asio::post(io_, [delivery = std::weak_ptr<ReplicationDelivery>(replication_)] {
    auto d = delivery.lock();
    if (d && d->step && d->wanted) d->step(*d->wanted);
  });
}

void ZkCoordinator::leave() {
  replication_->step = nullptr;
  deliver_ = nullptr;
  failPendingWrite("left ZooKeeper before the write's outcome was known");
  failPendingReport("left ZooKeeper before the takeover report's publication was known");
  session_.reset();
}

void ZkCoordinator::leaveKeepingMembership() {
  replication_->step = nullptr;
  failPendingWrite("the agent is stopping before the write's outcome was known");
  failPendingReport("the agent is stopping before the takeover report's publication was known");
  if (!session_) return;
  session_->detach();
  detached_ = true;
  session_.reset();
}

void ZkCoordinator::failPendingWrite(const std::string& why) {
  if (!pendingWrite_) return;
  ++writeSerial_;
  boost::asio::post(io_, [done = std::move(pendingWrite_), why] { done(StateWriteFinished{false, why, false, -1}); });
  pendingWrite_ = nullptr;
}

void ZkCoordinator::failPendingReport(const std::string& why) {
  if (!pendingReport_) return;
  ++reportSerial_;
  boost::asio::post(io_, [done = std::exchange(pendingReport_, nullptr), why] {
    done(ReportPublished{false, why + " (the election node may hold either)", -1});
  });
}

std::function<void(StateWriteFinished)> ZkCoordinator::writeAnswer() {
  return [this, alive = std::weak_ptr<int>(alive_), serial = writeSerial_](StateWriteFinished r) {
    if (alive.expired() || serial != writeSerial_ || !pendingWrite_) return;
    std::exchange(pendingWrite_, nullptr)(std::move(r));
  };
}

void ZkCoordinator::putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                                    std::function<void(StateWriteFinished)> done) {
  putCheckedClusterState(state, expectedVersion, reason, {}, std::move(done));
}

void ZkCoordinator::putCheckedClusterState(const ClusterState& state, int32_t expectedVersion,
                                           const std::string& reason, const std::vector<ElectionNodeCheck>& checks,
                                           std::function<void(StateWriteFinished)> done) {
  if (!session_) {
    boost::asio::post(io_, [done = std::move(done)] {
      done(StateWriteFinished{false, "not a member of the ZooKeeper cluster", false, -1});
    });
    return;
  }
  failPendingWrite("superseded by a newer write");
  pendingWrite_ = std::move(done);
  ++writeSerial_;
  if (checks.empty()) return session_->putClusterState(state, expectedVersion, writeAnswer(), reason);
  session_->putCheckedClusterState(state, expectedVersion, checks, writeAnswer(), reason);
}

void ZkCoordinator::publishReport(const std::optional<TakeoverReport>& report,
                                  std::function<void(ReportPublished)> done) {
  if (!session_) {
    boost::asio::post(io_, [done = std::move(done)] {
      done(ReportPublished{false, "not a member of the ZooKeeper cluster", -1});
    });
    return;
  }
  // Answered once: by the session, by a later publication (this one's answer is then
  // dropped) or by leave().
  failPendingReport("replaced by a later publication");
  pendingReport_ = std::move(done);
  session_->publishReport(report, [this, alive = std::weak_ptr<int>(alive_),
                                   serial = ++reportSerial_](ReportPublished r) {
    if (alive.expired() || serial != reportSerial_ || !pendingReport_) return;
    std::exchange(pendingReport_, nullptr)(std::move(r));
  });
}

driver::CoordinatorStatus ZkCoordinator::status() const {
  driver::CoordinatorStatus c;
  if (!session_) return c;
  auto s = session_->status();
  c.member = true;
  c.connected = s.connected;
  c.initialized = s.initialized;
  c.sessionId = s.sessionId;
  c.electionNode = s.electionNode;
  c.lastError = s.lastError;
  return c;
}

void PgPostgres::sampleSyncStandby(const std::string& standbyId,
                                   std::function<void(Result<driver::SyncReplicationSample>)> done) {
  pg_.syncStandby(standbyId, [done = std::move(done)](Result<pg::SyncStandbyView> view) {
    if (!view) return done(Error{view.error()});
    done(driver::SyncReplicationSample{view->streaming, view->flushed, view->waitingCommits});
  });
}

void PgPostgres::sampleQuorumMembers(const std::vector<std::string>& memberIds,
                                     std::function<void(Result<driver::QuorumReplicationSample>)> done) {
  pg_.quorumMembers(memberIds, [done = std::move(done)](Result<pg::QuorumMembersView> view) {
    if (!view) return done(Error{view.error()});
    driver::QuorumReplicationSample sample{view->primaryFlushed, {}};
    for (const auto& [id, m] : view->members) sample.members[id] = driver::SyncReplicationSample{m.streaming, m.flushed};
    done(std::move(sample));
  });
}

void PgPostgres::fenceQuorum(const Quorum& quorum, bool endWalsenders, int64_t timeoutMs,
                             std::function<void(PgFenced)> done) {
  pg::StandbyQuorum to{quorum.k, {}};
  for (const PeerIdentity& m : quorum.members) to.members.push_back(m.id);  // application_name = peer id
  pg_.fenceQuorum(std::move(to), endWalsenders, std::chrono::milliseconds(timeoutMs), std::move(done));
}

void PgPostgres::stopWrites(std::function<void(Result<int>)> done) {
  pg_.stopWrites([done = std::move(done)](Result<pg::WritesStopped> r) {
    if (!r) return done(Error{r.error()});
    done(r->terminated);
  });
}

void PgPostgres::rejoin(const PeerIdentity& primary, RejoinPolicy policy, std::function<void(driver::RejoinFinished)> done) {
  if (policy == RejoinPolicy::kManual) {
    return done(driver::RejoinFinished{false, false, "", "rejoin is manual"});  // the driver never asks
  }
  pg_.rejoin(primary, policy == RejoinPolicy::kRewind ? pg::RejoinLimit::kRewind : pg::RejoinLimit::kFollowOnly,
             [done = std::move(done)](pg::PgRejoined r) {
               done(driver::RejoinFinished{r.ok, r.rewound, std::move(r.discarded), std::move(r.error)});
             });
}

void SpdlogSink::write(LogLevel level, const std::string& line) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::debug("{}", line);
    case LogLevel::kInfo:
      return spdlog::info("{}", line);
    case LogLevel::kWarn:
      return spdlog::warn("{}", line);
    case LogLevel::kError:
      return spdlog::error("{}", line);
  }
}

}  // namespace dugong::agent

namespace dugong::agent {

void HttpPeerLink::askFailsafe(const PeerIdentity& to, const driver::FailsafeRequest& request, int64_t timeoutMs,
                               std::function<void(Result<driver::FailsafeAnswer>)> done) {
  if (!to.backupUrl) {
    return boost::asio::post(io_, [done = std::move(done), id = to.id] {
      done(Error{id + " publishes no HTTP address (its http.listen is \"\")"});
    });
  }
  FailsafeCall call{cluster_, request, to.id, freshNonce(), ""};
  httpPostAsync(io_, *to.backupUrl + "/failsafe", failsafeBody(call, key_), "", std::chrono::milliseconds(timeoutMs),
                [done = std::move(done), call, key = key_](Result<HttpResponse> r) {
                  if (!r) return done(Error{r.error()});
                  done(parseFailsafeReply(*r, call, key));
                });
}

}  // namespace dugong::agent
