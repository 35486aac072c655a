// The daemon's environment for the driver (driver/env.h): Asio timers on the agent's
// io_context, the ZooKeeper session (zk::Session) as the coordinator, the pg adapter
// (pg::PgAdapter) as postgres, spdlog as the log.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "agent/config.h"
#include "agent/peer_key.h"
#include "agent/suspend_clock.h"
#include "driver/env.h"
#include "pg/adapter.h"
#include "zk/options.h"
#include "zk/session.h"
#include "zk/source_watch.h"

namespace dugong::agent {

// The driver's clock: monotonicMs() is CLOCK_BOOTTIME (agent/suspend_clock.h), which
// counts the host's suspends. Its timers wait on Asio's steady timers, which a suspend
// holds back: when a suspend is seen (checkForSuspend, at each of the agent's ticks and
// each reading of the clock), every pending timer is set again for its due boot time,
// so that a deadline a suspend ran past fires at once.
class AsioClock : public driver::Clock {
 public:
  // `suspends`: tests pass one reading their own clocks.
  explicit AsioClock(boost::asio::io_context& io,
                     std::shared_ptr<SuspendTracker> suspends = std::make_shared<SuspendTracker>());
  EpochMs wallMs() const override;
  int64_t monotonicMs() const override;
  std::unique_ptr<driver::Timer> newTimer() override;
  void post(std::function<void()> fn) override;
  // Samples for a suspend; after one, logs it and sets every pending timer again.
  void checkForSuspend() const;
  // The boot time of a steady-clock time of the past (the ZooKeeper client's).
  int64_t bootOfSteadyMs(int64_t steadyMs) const { return suspends_->bootOf(steadyMs); }

  class Timers;  // the pending timers (daemon_env.cc)

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<SuspendTracker> suspends_;
  std::shared_ptr<Timers> timers_;
};

// Membership is one zk::Session: join opens one, leave closes it.
class ZkCoordinator : public driver::Coordinator {
 public:
  // `clock`: dates the lease's round trips in its time (outlives this).
  ZkCoordinator(boost::asio::io_context& io, zk::ZkOptions options, PeerIdentity self, const AsioClock& clock);
  ~ZkCoordinator() override;

  // The session to re-attach to at the next join (once), and what to call with each
  // new session's credentials (to save them). Set before the first join.
  void keepSessionAcrossRestarts(std::optional<zk::SessionCredentials> resume,
                                 std::function<void(zk::SessionCredentials)> onNewSession);
  Result<bool> join(driver::CoordinatorCallbacks callbacks) override;
  void leave() override;
  // Detaches the session (zk::Session::detach): the process is about to exit.
  void leaveKeepingMembership() override;
  // True once leaveKeepingMembership() has detached a session (the process must exit
  // without waiting for it: it stays open until then).
  bool detached() const { return detached_; }
  void putClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                       std::function<void(StateWriteFinished)> done) override;
  // Quorum mode (docs/decisions/0079-quorum-commit.md 4.4): zk::Session::putCheckedClusterState,
  // answered exactly once like putClusterState (the same write in flight: a newer write
  // or leave() answers it with a failure).
  void putCheckedClusterState(const ClusterState& state, int32_t expectedVersion, const std::string& reason,
                              const std::vector<ElectionNodeCheck>& checks,
                              std::function<void(StateWriteFinished)> done) override;
  driver::CoordinatorStatus status() const override;
  void publishDataState(const std::optional<PeerDataState>& data) override;
  void publishStreaming(bool streams) override;
  // Quorum mode (0079 4.2): zk::Session::publishReport on this membership's session. A
  // publication in flight is answered with a failure by leave() (the node may hold
  // either, as for a state write). The report lives in the session (kept across an
  // expiry, and by a restarted agent that re-attaches); a join after leave() opens a new
  // election node that holds none, as the driver expects of a withdrawn peer.
  void publishReport(const std::optional<TakeoverReport>& report,
                     std::function<void(ReportPublished)> done) override;
  // Quorum mode: `wanted` is stepped after each ZkInitialized and ClusterStateChanged
  // (so that a state machine the driver starts afresh has it too), and at once when it
  // changes while the session has told the state machine of a state. The agent's
  // cluster-configuration follower delivers it: the cluster configuration's `replication`
  // block, else this host's dugong.yaml's (0079 section 2, agent/cluster_config_follower.h).
  void deliverReplicationWanted(ReplicationWanted wanted);
  // Watches a node in every session from now on (zk::Session::watchNode): its content
  // after each session's setup and at each change. Not part of the driver's Coordinator:
  // the cluster configuration and requests are the daemon's, not the state machine's.
  void watchNode(const std::string& path, std::function<void(StateNode)> onChange);

 private:
  // A standby cluster of a `dugong` source (0083 3.3; phase 5 as built): while the state
  // this session read names one, a zk::SourceWatch reads the source's ensemble, and each
  // observation is stepped as SourceObserved (and again after each ZkInitialized and
  // ClusterStateChanged, so that a fresh state machine has it); another state stops it.
  void followSource(const StateNode& state);
  void failPendingWrite(const std::string& why);
  void failPendingReport(const std::string& why);
  // The answer to a write of the session, unless a newer write or leave() answered it.
  std::function<void(StateWriteFinished)> writeAnswer();

  boost::asio::io_context& io_;
  zk::ZkOptions options_;
  PeerIdentity self_;
  const AsioClock& clock_;
  std::unique_ptr<zk::Session> session_;
  std::optional<zk::SessionCredentials> resume_;
  std::function<void(zk::SessionCredentials)> onNewSession_;
  bool detached_ = false;
  std::optional<PeerDataState> dataState_;  // published in every session's election node
  std::optional<bool> streaming_;           // likewise
  // What is wanted of replication, and how to step it into the state machine of the
  // session joined (set by join once the session told it of a state; cleared by leave).
  struct ReplicationDelivery {
    std::optional<ReplicationWanted> wanted;
    std::function<void(Event)> step;
  };
  std::shared_ptr<ReplicationDelivery> replication_ = std::make_shared<ReplicationDelivery>();
  std::vector<std::pair<std::string, std::function<void(StateNode)>>> watched_;
  std::function<void(Event)> deliver_;  // the driver's onEvent while joined
  std::unique_ptr<zk::SourceWatch> sourceWatch_;
  // Watches no longer followed, stopped but perhaps still in a read of an unreachable
  // ensemble: joined once ended (or by the destructor), never on the event loop's
  // critical path (a join there held the loop for seconds past the watchdog's bound).
  std::vector<std::unique_ptr<zk::SourceWatch>> retiredSourceWatches_;
  std::optional<SourceObserved> sourceSeen_;
  // The write in flight: answered exactly once, by the session or by leave().
  uint64_t writeSerial_ = 0;
  std::function<void(StateWriteFinished)> pendingWrite_;
  // The report publication in flight: likewise.
  uint64_t reportSerial_ = 0;
  std::function<void(ReportPublished)> pendingReport_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// The other agents over HTTP: a failsafe request is a POST to the sync's agent (its
// identity's backupUrl, the agent's HTTP API: HTTPS, its certificate verified, when that
// agent has one), authenticated by the cluster's peer key when this agent has one
// (agent/failsafe_message.h); an answer that key does not vouch for is an error.
class HttpPeerLink : public driver::PeerLink {
 public:
  // From the agent's whole configuration: what it sends is decided here, never by the
  // caller (the bearer token of http.auth is not among it).
  HttpPeerLink(boost::asio::io_context& io, const AgentConfig& config)
      : io_(io), cluster_(config.zk.cluster), key_(config.peerKey) {}
  void askFailsafe(const PeerIdentity& to, const driver::FailsafeRequest& request, int64_t timeoutMs,
                   std::function<void(Result<driver::FailsafeAnswer>)> done) override;

 private:
  boost::asio::io_context& io_;
  std::string cluster_;
  std::optional<PeerKey> key_;
};

class PgPostgres : public driver::Postgres {
 public:
  // `status`: the agent's last status poll of postgres (outlives this), for streamSample.
  PgPostgres(pg::PgAdapter& adapter, const pg::PgStatus& status) : pg_(adapter), status_(status) {}
  void init(std::function<void(PgInitialized)> done) override { pg_.init(std::move(done)); }
  void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) override {
    pg_.apply(config, std::move(done));
  }
  void fence(const std::optional<PeerIdentity>& newSync, std::function<void(PgFenced)> done) override {
    pg_.fence(newSync, std::move(done));
  }
  // A membership step's fence (pg::PgController::fenceQuorum).
  void fenceQuorum(const Quorum& quorum, bool endWalsenders, int64_t timeoutMs,
                   std::function<void(PgFenced)> done) override;
  void readWal(std::function<void(WalPositionRead)> done) override { pg_.readWal(std::move(done)); }
  void sampleSyncStandby(const std::string& standbyId,
                         std::function<void(Result<driver::SyncReplicationSample>)> done) override;
  // One look at every member (pg::PgController::quorumMembers).
  void sampleQuorumMembers(const std::vector<std::string>& memberIds,
                           std::function<void(Result<driver::QuorumReplicationSample>)> done) override;
  void readDataState(std::function<void(Result<PeerDataState>)> done) override { pg_.dataState(std::move(done)); }
  void startHealthCheck(std::function<void(bool, const std::string&)> onChange) override {
    pg_.startHealthCheck(std::move(onChange));
  }
  void stopHealthCheck() override { pg_.stopHealthCheck(); }
  bool postmasterGone() const override { return pg_.postmasterGone(); }
  // From the last status poll: online, and pg_stat_wal_receiver's status "streaming"
  // under the upstream its configuration names.
  std::optional<driver::StreamSample> streamSample() const override {
    const bool streaming = status_.walReceiverStatus == "streaming" && status_.upstream;
    return driver::StreamSample{status_.online, streaming ? *status_.upstream : std::string()};
  }
  void stopWrites(std::function<void(Result<int>)> done) override;
  void resumeWrites(std::function<void(Result<bool>)> done) override { pg_.resumeWrites(std::move(done)); }
  void shutDownWrites(std::function<void(Result<bool>)> done) override { pg_.shutDownWrites(std::move(done)); }
  void rejoin(const PeerIdentity& primary, RejoinPolicy policy, std::function<void(driver::RejoinFinished)> done) override;
  void awaitUpstreamStop(int64_t timeoutMs, std::function<void(bool)> done) override {
    pg_.awaitUpstreamStop(std::chrono::milliseconds(timeoutMs), std::move(done));
  }

 private:
  pg::PgAdapter& pg_;
  const pg::PgStatus& status_;
};

class SpdlogSink : public driver::LogSink {
 public:
  void write(LogLevel level, const std::string& line) override;
};

}  // namespace dugong::agent
