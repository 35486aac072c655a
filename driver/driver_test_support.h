// The driver's runner tests' environment (driver/driver_test.cc): the test answers every
// postgres and coordinator operation itself and moves the clock. The core's protocols
// are specified by transcripts instead (driver/transcript_test.cc).
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "driver/driver.h"

namespace dugong::driver::testing {


inline PeerIdentity peerId(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  p.ip = "10.0.0." + id.substr(4);
  p.pgUrl = "tcp://postgres@" + p.ip + ":5432/postgres";
  p.zoneId = id;
  return p;
}

// Virtual time; posted work and timers run when the test advances the clock.
class FakeClock : public Clock {
 public:
  struct Item {
    int64_t at;
    uint64_t seq;
    std::function<void()> fn;
    std::shared_ptr<bool> live;
  };

  EpochMs wallMs() const override { return 1767225600000 + now_; }
  int64_t monotonicMs() const override { return now_; }
  void post(std::function<void()> fn) override { items_.push_back({now_, seq_++, std::move(fn), nullptr}); }
  std::unique_ptr<Timer> newTimer() override;

  void advance(int64_t ms) {
    const int64_t until = now_ + ms;
    for (;;) {
      auto next = items_.end();
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (it->at <= until && (next == items_.end() || it->at < next->at || (it->at == next->at && it->seq < next->seq)))
          next = it;
      }
      if (next == items_.end()) break;
      Item item = std::move(*next);
      items_.erase(next);
      now_ = std::max(now_, item.at);
      if (!item.live || *item.live) item.fn();
    }
    now_ = std::max(now_, until);
  }
  void schedule(int64_t delay, std::function<void()> fn, std::shared_ptr<bool> live) {
    items_.push_back({now_ + delay, seq_++, std::move(fn), std::move(live)});
  }

 private:
  int64_t now_ = 0;
  uint64_t seq_ = 0;
  std::vector<Item> items_;
};

class FakeTimer : public Timer {
 public:
  explicit FakeTimer(FakeClock& clock) : clock_(clock) {}
  ~FakeTimer() override { cancel(); }
  void start(int64_t delayMs, std::function<void()> fired) override {
    cancel();
    live_ = std::make_shared<bool>(true);
    clock_.schedule(delayMs, [live = live_, fired = std::move(fired)] {
      *live = false;
      fired();
    }, live_);
  }
  void cancel() override {
    if (live_) *live_ = false;
  }

 private:
  FakeClock& clock_;
  std::shared_ptr<bool> live_;
};

inline std::unique_ptr<Timer> FakeClock::newTimer() { return std::make_unique<FakeTimer>(*this); }

class FakeCoordinator : public Coordinator {
 public:
  Result<bool> join(CoordinatorCallbacks callbacks) override {
    ++joins;
    callbacks_ = std::move(callbacks);
    member = true;
    return true;
  }
  void leave() override {
    if (!member) return;
    ++leaves;
    member = false;
    callbacks_ = {};
    if (pendingWrite) {
      auto done = std::move(*pendingWrite);
      pendingWrite.reset();
      clock->post([done] { done(StateWriteFinished{false, "left", false, -1}); });
    }
  }
  void putClusterState(const ClusterState& state, int32_t version, const std::string& reason,
                       std::function<void(StateWriteFinished)> done) override {
    writes.push_back(state);
    writeVersions.push_back(version);
    reasons.push_back(reason);
    pendingWrite = std::move(done);
  }
  CoordinatorStatus status() const override { return CoordinatorStatus{member, member, member, 1, "", ""}; }
  void publishDataState(const std::optional<PeerDataState>& data) override { published.push_back(data); }
  void publishStreaming(bool streams) override { streaming.push_back(streams); }

  void deliver(const Event& e) {
    ASSERT_TRUE(member);
    callbacks_.onEvent(e);
  }
  void connection(bool connected) {
    ASSERT_TRUE(member);
    ASSERT_TRUE(callbacks_.onConnection);
    callbacks_.onConnection(CoordinatorConnection{connected, 0x42, 9000});
  }
  // A leader round trip sent at `sentAtMs` answered (session timeout 9000, interval 500).
  void lease(int64_t sentAtMs, int64_t sessionId = 0x42) {
    ASSERT_TRUE(member);
    ASSERT_TRUE(callbacks_.onLease);
    callbacks_.onLease(CoordinatorLease{sentAtMs, sessionId, 9000, 500});
  }

  FakeClock* clock = nullptr;
  int joins = 0, leaves = 0;
  bool member = false;
  std::vector<ClusterState> writes;
  std::vector<int32_t> writeVersions;
  std::vector<std::string> reasons;
  std::optional<std::function<void(StateWriteFinished)>> pendingWrite;
  std::vector<std::optional<PeerDataState>> published;
  std::vector<bool> streaming;  // publishStreaming, in order

 private:
  CoordinatorCallbacks callbacks_;
};

class FakePostgres : public Postgres {
 public:
  void init(std::function<void(PgInitialized)> done) override { inits.push_back(std::move(done)); }
  void apply(const PgConfig& config, std::function<void(PgConfigApplied)> done) override {
    applies.push_back({config, std::move(done)});
  }
  void fence(const std::optional<PeerIdentity>&, std::function<void(PgFenced)> done) override {
    fences.push_back(std::move(done));
  }
  void readWal(std::function<void(WalPositionRead)> done) override { walReads.push_back(std::move(done)); }
  void startHealthCheck(std::function<void(bool, const std::string&)> onChange) override {
    health = std::move(onChange);
  }
  void stopHealthCheck() override { health = nullptr; }
  void stopWrites(std::function<void(Result<int>)> done) override { stops.push_back(std::move(done)); }
  void resumeWrites(std::function<void(Result<bool>)> done) override { resumes.push_back(std::move(done)); }
  void shutDownWrites(std::function<void(Result<bool>)> done) override { shutdowns.push_back(std::move(done)); }
  // Every operation of the interface is overridden, whether or not env.h has a default:
  // the test answers what it cares about, and the rest waits unanswered.
  void readDataState(std::function<void(Result<PeerDataState>)> done) override { dataReads.push_back(std::move(done)); }
  void rejoin(const PeerIdentity&, RejoinPolicy, std::function<void(RejoinFinished)> done) override {
    rejoins.push_back(std::move(done));
  }
  void awaitUpstreamStop(int64_t, std::function<void(bool)> done) override { upstreamWaits.push_back(std::move(done)); }
  void sampleSyncStandby(const std::string&, std::function<void(Result<SyncReplicationSample>)> done) override {
    syncSamples.push_back(std::move(done));
  }
  bool postmasterGone() const override { return false; }
  std::optional<StreamSample> streamSample() const override { return std::nullopt; }

  // Answers the oldest apply.
  PgConfig finishApply(bool ok) {
    auto [config, done] = std::move(applies.front());
    applies.pop_front();
    done(PgConfigApplied{ok, ok ? "" : "failed", ok && config.role != PgRole::kNone});
    return config;
  }

  std::deque<std::function<void(PgInitialized)>> inits;
  std::deque<std::pair<PgConfig, std::function<void(PgConfigApplied)>>> applies;
  std::deque<std::function<void(PgFenced)>> fences;
  std::deque<std::function<void(WalPositionRead)>> walReads;
  std::function<void(bool, const std::string&)> health;
  std::deque<std::function<void(Result<int>)>> stops;
  std::deque<std::function<void(Result<bool>)>> resumes;
  std::deque<std::function<void(Result<bool>)>> shutdowns;
  std::deque<std::function<void(Result<PeerDataState>)>> dataReads;
  std::deque<std::function<void(RejoinFinished)>> rejoins;
  std::deque<std::function<void(bool)>> upstreamWaits;
  std::deque<std::function<void(Result<SyncReplicationSample>)>> syncSamples;
};

// The other agents: the test answers each failsafe request itself.
class FakePeerLink : public PeerLink {
 public:
  struct Ask {
    PeerIdentity to;
    FailsafeRequest request;
    int64_t timeoutMs = 0;
    std::function<void(Result<FailsafeAnswer>)> done;
  };
  void askFailsafe(const PeerIdentity& to, const FailsafeRequest& request, int64_t timeoutMs,
                   std::function<void(Result<FailsafeAnswer>)> done) override {
    asks.push_back({to, request, timeoutMs, std::move(done)});
  }
  // Answers the oldest request.
  Ask answer(Result<FailsafeAnswer> a) {
    Ask ask = std::move(asks.front());
    asks.pop_front();
    ask.done(std::move(a));
    return ask;
  }
  std::deque<Ask> asks;
};

class NullLog : public LogSink {
 public:
  void write(LogLevel, const std::string& line) override { lines.push_back(line); }
  std::vector<std::string> lines;
};

inline StateNode stateNode(const ClusterState& s, int32_t version) { return StateNode{true, s.serialize(), version}; }

class DriverTest : public ::testing::Test {
 protected:
  DriverTest() {
    coordinator_.clock = &clock_;
    makeDriver(RejoinPolicy::kFollow);
  }
  void makeDriver(RejoinPolicy rejoin) {
    DriverOptions o;
    o.identity = peerId("node1");
    o.withdrawAfterMs = 10000;
    o.rejoin = rejoin;
    o.lease.tickTimeMs = 1000;  // lease: 9000 - 1000 - 500 - 90 - 300 = 7110 ms after the send
    o.failsafe = failsafe_;
    o.failsafeDurationMs = failsafeDurationMs_;
    o.recordPromise = recordPromise_;
    driver_.reset();
    driver_ = std::make_unique<Runner>(Env{clock_, coordinator_, pg_, log_, &peers_}, o);
  }
  // node1 is the sync of generation 1 (primary node2, async node3), streaming and healthy.
  void startAsSync() {
    ASSERT_TRUE(driver_->start());
    pg_.inits.front()(PgInitialized{true, true});
    pg_.inits.pop_front();
    state_.generation = 1;
    state_.primary = peerId("node2");
    state_.sync = peerId("node1");
    state_.async = {peerId("node3")};
    coordinator_.deliver(ZkInitialized{stateNode(state_, 0), active({"node2", "node1", "node3"})});
    clock_.advance(0);
    ASSERT_EQ(pg_.applies.size(), 1u);
    EXPECT_EQ(pg_.finishApply(true).role, PgRole::kSync);
    pg_.health(true, "");
    clock_.advance(0);
  }

  static PeerList active(const std::vector<std::string>& ids) {
    PeerList l;
    for (const auto& id : ids) l.push_back(peerId(id));
    return l;
  }

  FakeClock clock_;
  FakeCoordinator coordinator_;
  FakePostgres pg_;
  NullLog log_;
  FakePeerLink peers_;
  bool failsafe_ = false;  // DriverOptions::failsafe of makeDriver
  // DriverOptions::failsafeDurationMs and recordPromise of makeDriver.
  int64_t failsafeDurationMs_ = 9000;
  std::function<Result<bool>(int64_t)> recordPromise_;
  std::unique_ptr<Runner> driver_;
  ClusterState state_;
};

}  // namespace dugong::driver::testing
