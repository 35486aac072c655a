// End-to-end: three (or more) real agents, real postgres, one real ZooKeeper.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "ops/http_client.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

// A socket listening on 127.0.0.1:port, or -1 if the port is taken.
int listenOn(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class E2E : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }
  // Starts `peers` agents and waits for a writable primary with every other peer
  // streaming; returns the primary's index.
  int startCluster(int peers = 3, HarnessOptions o = {}) {
    o.peers = peers;
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    int primary = h_->waitForHealthyCluster(peers - 1, 180s);
    EXPECT_GE(primary, 0) << "no writable primary with " << peers - 1 << " streaming replicas";
    return primary;
  }
  int indexWithRole(const std::string& role) { return h_->indexWithRole(role); }
  // Waits (60 s) for generation 2 to name peer `i` the primary: its takeover.
  bool waitForTakeoverBy(int i) {
    return h_->waitFor(
        [&] { auto s = h_->zkState(); return s && s->generation == 2 && s->primary.id == h_->peer(i).id; }, 60s);
  }
  // Inserts rows id..id+n-1 on the writable primary through the multi-host string.
  void createTable(int primary) {
    auto r = h_->sql(primary, "CREATE TABLE IF NOT EXISTS acked (id int PRIMARY KEY, at timestamptz DEFAULT now())");
    ASSERT_TRUE(r.ok()) << r.error();
  }
  bool insert(int peer, int id) { return h_->sql(peer, "INSERT INTO acked (id) VALUES (" + std::to_string(id) + ")", 5s).ok(); }
  std::set<int> ids(int peer) { return h_->intColumn(peer, "SELECT id FROM acked"); }
  // Kills a peer's postmaster and takes its port, so that postgres cannot run there; the
  // listening socket, or -1. The agent restarts a postmaster found gone at once, so it is
  // paused (briefly: its session and its peers see nothing) until the port is taken (it
  // won that race under load in the sanitizer build).
  int killPostgresAndTakeItsPort(int peer) {
    h_->pauseAgent(peer);
    h_->killPostgres(peer);
    int squatter = -1;
    h_->waitFor([&] { return (squatter = listenOn(h_->peer(peer).pg->port)) >= 0; }, 10s);
    h_->resumeAgent(peer);
    return squatter;
  }
  // The primary's agent goes (`goAway`) and stays away with its postgres left running; once
  // the sync has taken over, the old postgres acknowledges no commit, not even one that
  // waits for nobody, and the agent, back, finds its peer deposed.
  void expectNoWritesOnTheOldPrimaryAfterTheTakeover(const std::function<void(int)>& goAway) {
    int primary = startCluster();
    ASSERT_GE(primary, 0);
    int sync = indexWithRole("sync");
    createTable(primary);
    goAway(primary);
    ASSERT_TRUE(waitForTakeoverBy(sync));
    ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
    auto local = h_->sql(primary, "SET synchronous_commit = local; INSERT INTO acked (id) VALUES (667)", 3s);
    EXPECT_FALSE(local.ok()) << "the deposed primary acknowledged a write with synchronous_commit = local";
    h_->startAgent(primary);
    EXPECT_TRUE(h_->waitFor([&] { return h_->role(primary) == "deposed"; }, 30s));
  }
  std::unique_ptr<Harness> h_;
};

// The cases whose claims other tests of the default run, the simulator's seeds and
// mutants hold (docs/safety.md, "Cluster test cases run only with --full"): ctest label
// full, run by scripts/test.sh --full.
class E2EFull : public E2E {};

// The cluster sets itself up and replicates to its sync and async; a fourth peer joins the
// async chain and streams from the async; stopped for good (`--leave`), it leaves the
// chain at once, and back, it is appended again: all in generation 1.
TEST_F(E2E, ClusterSetsItselfUpAndItsAsyncChainFollowsPeersComingAndGoing) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  auto s = h_->zkState();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->generation, 1);
  EXPECT_EQ(s->primary.id, h_->peer(primary).id);
  ASSERT_TRUE(s->sync.has_value());
  ASSERT_EQ(s->async.size(), 1u);
  int sync = h_->indexOf(s->sync->id);
  int async = h_->indexOf(s->async[0].id);
  EXPECT_EQ(h_->role(sync), "sync");
  EXPECT_EQ(h_->role(async), "async");
  EXPECT_EQ(h_->httpStatus(sync, "/primary"), 503);
  EXPECT_EQ(h_->httpStatus(primary, "/replica"), 503);
  EXPECT_EQ(h_->httpStatus(primary, "/ping"), 200);

  createTable(primary);
  ASSERT_TRUE(insert(primary, 1));
  for (int standby : {sync, async}) {
    EXPECT_TRUE(h_->waitFor([&] { return ids(standby).count(1) == 1; }, 30s)) << h_->peer(standby).id;
  }
  // The primary names the sync as its synchronous standby, and the sync streams synchronously.
  auto st = h_->status(primary);
  ASSERT_TRUE(st.has_value());
  bool sawSync = false;
  for (const auto& row : (*st)["postgres"]["replication"]) {
    if (row["applicationName"] == h_->peer(sync).id && row["syncState"] == "sync") sawSync = true;
  }
  EXPECT_TRUE(sawSync) << st->dump();
  EXPECT_EQ((*st)["peer"]["role"], "primary");
  auto metrics = agent::httpGet("http://127.0.0.1:" + std::to_string(h_->peer(primary).httpPort) + "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.error();
  EXPECT_EQ(metrics->status, 200);
  for (const char* line : {"dugong_role{role=\"primary\"} 1", "dugong_generation 1", "dugong_postgres_writable 1",
                           "dugong_zookeeper_connected 1", "dugong_replication_lag_bytes{standby=\""}) {
    EXPECT_NE(metrics->body.find(line), std::string::npos) << line << "\n" << metrics->body;
  }

  const int fourth = h_->addPeer();
  const std::string id = h_->peer(fourth).id;
  auto chainEnd = [&] { auto z = h_->zkState(); return z && z->async.size() == 2 && z->async[1].id == id; };
  h_->startAgent(fourth);
  ASSERT_TRUE(h_->waitFor(chainEnd, 60s));
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(fourth, "/replica") == 200; }, 120s));
  ASSERT_TRUE(insert(primary, 4));
  EXPECT_TRUE(h_->waitFor([&] { return ids(fourth).count(4) == 1; }, 30s));

  h_->stopAgent(fourth);                 // keeps the session for a restart
  ASSERT_EQ(h_->leaveAgent(fourth), 0);  // ends it now: the peer is gone at once
  ASSERT_TRUE(h_->waitFor([&] { auto z = h_->zkState(); return z && z->async.size() == 1; }, 30s));
  h_->startAgent(fourth);
  ASSERT_TRUE(h_->waitFor(chainEnd, 60s));
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(fourth, "/replica") == 200; }, 60s));
  EXPECT_EQ(h_->zkState()->generation, 1);
}

// Three primary host kills in a row on three peers, each host back a few seconds later,
// with the default configuration: each killed primary (diverged: its crash recovery wrote
// WAL of its own) rejoins by pg_rewind without an operator, so the cluster can fail over
// again each time, and no acknowledged row is lost. Each takeover also checks the
// previous generation's initTimeline against the WAL history the real adapter reads (a
// sync must be on the generation's timeline at initWal, statemachine/peer.cc).
TEST_F(E2EFull, AThreePeerClusterSurvivesThreePrimaryKillsInARowAndNoAcknowledgedRowIsLost) {
  int primary = startCluster(3);
  ASSERT_GE(primary, 0);
  createTable(primary);
  std::set<int> acked;
  for (int kill = 1; kill <= 3; ++kill) {
    for (int id = kill * 1000; id < kill * 1000 + 20; ++id) {
      if (insert(primary, id)) acked.insert(id);
    }
    ASSERT_EQ(acked.size(), static_cast<size_t>(kill * 20));
    const int sync = indexWithRole("sync");
    ASSERT_GE(sync, 0);
    h_->killAgent(primary);
    h_->killPostgres(primary);
    ASSERT_TRUE(h_->waitFor(
        [&] {
          auto s = h_->zkState();
          return s && s->generation == kill + 1 && s->primary.id == h_->peer(sync).id;
        },
        60s))
        << "kill " << kill << ": no takeover by " << h_->peer(sync).id;
    auto s = h_->zkState();
    EXPECT_TRUE(containsPeer(s->deposed, h_->peer(primary).id));
    EXPECT_EQ(s->initTimeline, kill);  // the sync had followed the previous primary's timeline to initWal
    ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s)) << "kill " << kill;
    std::this_thread::sleep_for(3s);  // the host is down for a while
    h_->startAgent(primary);
    // Back: it rejoins as an async by itself (rewound), and the cluster is whole again.
    ASSERT_TRUE(h_->waitFor([&] { return h_->httpStatus(primary, "/replica") == 200; }, 120s))
        << "kill " << kill << ": " << h_->peer(primary).id << " did not rejoin\n" << h_->logTail(primary);
    EXPECT_NE(h_->logTail(primary, 100000).find("pg_rewind discarded the WAL from"), std::string::npos)
        << h_->logTail(primary);
    ASSERT_EQ(h_->waitForHealthyCluster(2, 60s), sync) << "kill " << kill;
    primary = sync;
  }
  ASSERT_TRUE(insert(primary, 9999));
  std::set<int> present = ids(primary);
  for (int id : acked) EXPECT_EQ(present.count(id), 1u) << "acknowledged row " << id << " is missing";
}

TEST_F(E2EFull, PrimaryPromotesTheAsyncWhenTheSyncIsKilled) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  int async = indexWithRole("async");
  h_->killAgent(sync);
  h_->killPostgres(sync);
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        return s && s->generation == 2 && s->sync && s->sync->id == h_->peer(async).id;
      },
      60s));
  auto s = h_->zkState();
  EXPECT_EQ(s->primary.id, h_->peer(primary).id);
  EXPECT_TRUE(s->deposed.empty());  // the old sync is dropped, not deposed
  createTable(primary);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == primary && insert(primary, 7); }, 60s));
  EXPECT_TRUE(h_->waitFor([&] { return ids(async).count(7) == 1; }, 30s));
}

// Sends `signal` to a peer's postmaster and every process it started.
void signalPostgres(const pg::testing::PgTestNode& node, int signal) {
  auto postmaster = node.postmasterPid();
  ASSERT_TRUE(postmaster.has_value());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == *postmaster) ::kill(std::stoi(entry.path().filename().string()), signal);
  }
  ::kill(*postmaster, signal);
}

// A sync whose postgres hangs (every process stopped) keeps its ZooKeeper session and
// acknowledges nothing: the primary replaces it by the async within seconds (not when the
// fault ends), the commit that waited is acknowledged by the new sync, and the old sync,
// back, streams again as the last async. The agent's default sync.replaceAfterMs.
TEST_F(E2E, APrimaryReplacesAHungSyncAndTheWaitingCommitIsAcknowledgedByTheNewOne) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  const int sync = indexWithRole("sync"), async = indexWithRole("async");
  createTable(primary);
  ASSERT_TRUE(insert(primary, 1));
  signalPostgres(*h_->peer(sync).pg, SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  auto waited = h_->sql(primary, "INSERT INTO acked (id) VALUES (2)", 60s);
  const auto gapMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "the commit waited " << gapMs << " ms on the hung sync\n";
  signalPostgres(*h_->peer(sync).pg, SIGCONT);
  ASSERT_TRUE(waited.ok()) << waited.error() << "\n" << h_->describe();
  auto s = h_->zkState();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->generation, 2);
  EXPECT_EQ(s->primary.id, h_->peer(primary).id);
  ASSERT_TRUE(s->sync.has_value());
  EXPECT_EQ(s->sync->id, h_->peer(async).id);
  ASSERT_EQ(s->async.size(), 1u);
  EXPECT_EQ(s->async[0].id, h_->peer(sync).id);
  EXPECT_TRUE(s->deposed.empty());
  EXPECT_NE(h_->logTail(primary, 100000).find("acknowledges no commits"), std::string::npos);
  EXPECT_EQ(ids(async).count(2), 1u) << "the new sync acknowledged a commit it does not hold";
  // The old sync streams again, now from the new sync.
  EXPECT_TRUE(h_->waitFor([&] { return ids(sync).count(2) == 1; }, 60s)) << h_->describe();
  EXPECT_EQ(h_->writablePrimary(), primary);
}

// The primary's agent whose loop hangs while the process runs (its log pipe full: a
// stuck journald, a pipe nobody reads) keeps its ZooKeeper session, since the client's
// own threads answer the pings, and does nothing: its postgres, killed, is never
// restarted, and the sync never takes over. Its watchdog finds the loop silent, kills
// the agent and removes the kept session: the session expires, the sync takes over and
// commits go through on it, within about withdrawAfterSeconds + the session timeout.
TEST_F(E2E, APrimaryWhoseAgentsLoopHungIsReplacedByItsSync) {
  HarnessOptions o;
  o.withdrawAfterSeconds = 4;
  o.agentLogsThroughPipes = true;
  int primary = startCluster(3, o);
  ASSERT_GE(primary, 0);
  const int sync = indexWithRole("sync");
  createTable(primary);
  ASSERT_TRUE(insert(primary, 1));
  h_->stallAgentLog(primary);
  h_->killPostgres(primary);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(waitForTakeoverBy(sync)) << h_->describe();
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync && insert(sync, 2); }, 60s)) << h_->describe();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "a commit went through on the new primary " << ms << " ms after the old one's loop hung (bound "
            << o.withdrawAfterSeconds * 1000 + o.sessionTimeoutMs << " ms)\n";
  h_->resumeAgentLog(primary);
  EXPECT_FALSE(h_->agentRunning(primary)) << "the hung agent runs on";
  EXPECT_EQ(ids(sync).count(1), 1u);
}

// `systemctl restart dugong` on the primary, then on the sync: each agent re-attaches
// to its ZooKeeper session, so no peer sees it go, no takeover, no new generation; the
// primary stays writable. (Before: the stop closed the session and the sync took over.)
TEST_F(E2E, RestartingThePrimarysAndTheSyncsAgentsChangesNothing) {
  // A session timeout that a restart under ASan on a loaded 2-core host cannot outlast
  // (a stop and a start there took more than the default 3 s).
  HarnessOptions o;
  o.sessionTimeoutMs = 8000;
  int primary = startCluster(3, o);
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  int async = indexWithRole("async");
  createTable(primary);
  ASSERT_TRUE(insert(primary, 1));
  const auto before = h_->zkState();
  ASSERT_TRUE(before.has_value());
  const size_t historyBefore = h_->history().size();
  int id = 2;
  for (int restarted : {primary, sync}) {
    auto status = h_->status(restarted);
    ASSERT_TRUE(status.has_value());
    const auto sessionId = (*status)["zookeeper"]["sessionId"].get<int64_t>();
    h_->stopAgent(restarted);
    h_->startAgent(restarted);
    ASSERT_TRUE(h_->waitFor(
        [&] {
          auto s = h_->status(restarted);
          return s && (*s)["zookeeper"]["initialized"] == true && (*s)["peer"]["role"] != "unknown";
        },
        60s))
        << h_->logTail(restarted);
    EXPECT_EQ((*h_->status(restarted))["zookeeper"]["sessionId"].get<int64_t>(), sessionId)
        << "the restarted agent did not re-attach to its session";
    EXPECT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == primary && insert(primary, id); }, 30s));
    ++id;
  }
  // Well past the session timeout: nothing changed in ZooKeeper.
  std::this_thread::sleep_for(std::chrono::milliseconds(h_->options().sessionTimeoutMs * 2));
  auto after = h_->zkState();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->generation, before->generation);
  EXPECT_EQ(after->primary.id, h_->peer(primary).id);
  ASSERT_TRUE(after->sync.has_value());
  EXPECT_EQ(after->sync->id, h_->peer(sync).id);
  ASSERT_EQ(after->async.size(), 1u);
  EXPECT_EQ(after->async[0].id, h_->peer(async).id);
  EXPECT_TRUE(after->deposed.empty());
  EXPECT_EQ(h_->history().size(), historyBefore) << "the cluster state was written during the restarts";
  EXPECT_EQ(h_->role(primary), "primary");
  EXPECT_EQ(h_->role(sync), "sync");
  EXPECT_TRUE(insert(primary, id));
  EXPECT_TRUE(h_->waitFor([&] { return ids(sync).count(id) == 1; }, 30s));
}

// A primary stopped for good (`--leave` after the stop) is replaced at once, as a
// failed one is: its sync takes over.
TEST_F(E2E, PrimaryStoppedForGoodIsReplacedByItsSync) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  createTable(primary);
  h_->stopAgent(primary);
  ASSERT_EQ(h_->leaveAgent(primary), 0) << h_->logTail(primary);
  ASSERT_TRUE(waitForTakeoverBy(sync));
  EXPECT_EQ(h_->zkState()->deposed.size(), 1u);
  // --leave shut the old primary's postgres down before ending the session.
  auto local = h_->sql(primary, "SET synchronous_commit = local; INSERT INTO acked (id) VALUES (667)", 3s);
  EXPECT_FALSE(local.ok()) << "the primary that left acknowledged a write with synchronous_commit = local";
  // Nothing left to leave.
  EXPECT_EQ(h_->leaveAgent(primary), 0);
}

// A clean stop of the primary's agent (systemctl stop, an upgrade whose new agent does not
// come back) keeps the session for a restart and leaves postgres running; once the session
// expires the sync takes over, and the old postgres must acknowledge nothing by then: the
// watchdog the stop left armed has shut it down.
TEST_F(E2E, PrimaryWhoseAgentWasStoppedAcknowledgesNoWritesAfterTheTakeover) {
  expectNoWritesOnTheOldPrimaryAfterTheTakeover([&](int primary) { h_->stopAgent(primary); });
}

TEST_F(E2EFull, FreezeBlocksTakeoverUntilUnfrozen) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  ASSERT_TRUE(h_->updateState([](ClusterState& s) { s.freeze = {{"date", "now"}, {"reason", "e2e test"}}; }));
  h_->killAgent(primary);
  h_->killPostgres(primary);
  // Well past the session timeout: still generation 1.
  std::this_thread::sleep_for(std::chrono::milliseconds(h_->options().sessionTimeoutMs * 3));
  auto s = h_->zkState();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->generation, 1);
  EXPECT_EQ(s->primary.id, h_->peer(primary).id);
  EXPECT_EQ(h_->role(sync), "sync");
  ASSERT_TRUE(h_->updateState([](ClusterState& st) { st.freeze = nullptr; }));
  ASSERT_TRUE(h_->waitFor(
      [&] { auto st = h_->zkState(); return st && st->generation == 2 && st->primary.id == h_->peer(sync).id; }, 60s));
  EXPECT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
}

TEST_F(E2E, SinglePeerInOneNodeWriteModeBootstrapsWritable) {
  HarnessOptions o;
  o.peers = 0;
  h_ = std::make_unique<Harness>(o);
  int only = h_->addPeer(/*singleton=*/true);
  h_->startAgent(only);
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == only; }, 120s));
  auto s = h_->zkState();
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->oneNodeWriteMode);
  EXPECT_FALSE(s->sync.has_value());
  EXPECT_TRUE(s->frozen());
  createTable(only);
  EXPECT_TRUE(insert(only, 1));
}

// A primary cut off from ZooKeeper (its agent paused past the session timeout) must not
// acknowledge writes once the sync has taken over: its synchronous standby is gone.
TEST_F(E2E, PrimaryWhoseSessionExpiredAcknowledgesNoWrites) {
  int primary = startCluster();
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  createTable(primary);
  h_->pauseAgent(primary);
  ASSERT_TRUE(waitForTakeoverBy(sync));
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 60s));
  // The old postgres acknowledges nothing: not a commit that would wait for its sync,
  // and not one that waits for nobody (synchronous_commit = local). Its agent is frozen,
  // so the agent's watchdog process has stopped it.
  auto r = h_->sql(primary, "INSERT INTO acked (id) VALUES (666)", 3s);
  EXPECT_FALSE(r.ok()) << "the deposed primary acknowledged a write";
  auto local = h_->sql(primary, "SET synchronous_commit = local; INSERT INTO acked (id) VALUES (667)", 3s);
  EXPECT_FALSE(local.ok()) << "the deposed primary acknowledged a write with synchronous_commit = local";
  EXPECT_EQ(ids(sync).count(666), 0u);
  h_->resumeAgent(primary);
  EXPECT_TRUE(h_->waitFor([&] { return h_->role(primary) == "deposed"; }, 30s));
  EXPECT_TRUE(h_->waitFor([&] { return !h_->sql(primary, "SELECT 1", 1s).ok(); }, 60s))
      << "a deposed peer must stop its postgres";
}

// The same with the primary's agent killed (kill -9, out of memory) and not restarted:
// its postgres runs on, and the watchdog, which outlives the agent it watches, stops it
// before the session can expire.
TEST_F(E2E, PrimaryWhoseAgentWasKilledAcknowledgesNoWritesAfterTheTakeover) {
  expectNoWritesOnTheOldPrimaryAfterTheTakeover([&](int primary) { h_->killAgent(primary); });
}

// A peer whose postgres cannot run (another process holds its port) leaves ZooKeeper after
// health.withdrawAfterSeconds and comes back by itself once postgres can run again; one
// cluster, first its sync, then its primary.
// - The sync: the primary promotes the async to sync; once its port is free the agent
//   rejoins and the primary appends it as an async.
// - The primary: its sync takes over, and the old primary's postgres is kept down while it
//   is out of ZooKeeper (writes stopped: a restart there would make a writable primary
//   with no session). It joins again after withdrawAfterSeconds, learns it was deposed,
//   and, once its port is free, rejoins as a standby of the new primary without an
//   operator (rejoin: rewind, the default, since the killed primary's crash recovery may
//   write past the fork).
TEST_F(E2EFull, APeerWhosePostgresCannotRunWithdrawsAndComesBackAsAStandby) {
  HarnessOptions o;
  o.withdrawAfterSeconds = 4;
  int primary = startCluster(3, o);
  ASSERT_GE(primary, 0);
  int sync = indexWithRole("sync");
  int async = indexWithRole("async");
  int squatter = killPostgresAndTakeItsPort(sync);
  ASSERT_GE(squatter, 0);
  ASSERT_TRUE(h_->waitFor(
      [&] { auto s = h_->zkState(); return s && s->generation == 2 && s->sync && s->sync->id == h_->peer(async).id; },
      60s));
  EXPECT_TRUE(h_->agentRunning(sync));
  auto st = h_->status(sync);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE((*st)["zookeeper"]["withdrawn"].get<bool>()) << st->dump();
  ::close(squatter);
  ASSERT_TRUE(h_->waitFor(
      [&] { auto s = h_->zkState(); return s && s->async.size() == 1 && s->async[0].id == h_->peer(sync).id; }, 90s));
  ASSERT_TRUE(h_->waitFor([&] { return h_->httpStatus(sync, "/replica") == 200; }, 90s));

  // Now the primary, whose sync is the former async.
  const int newSync = async;
  const std::string oldPrimary = h_->peer(primary).id;
  squatter = killPostgresAndTakeItsPort(primary);
  ASSERT_GE(squatter, 0);
  ASSERT_TRUE(h_->waitFor(
      [&] { auto s = h_->zkState(); return s && s->generation == 3 && s->primary.id == h_->peer(newSync).id; }, 60s))
      << h_->describe();
  EXPECT_TRUE(h_->agentRunning(primary));
  st = h_->status(primary);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE((*st)["health"]["writesStopped"].get<bool>()) << st->dump();
  EXPECT_FALSE((*st)["health"]["writablePrimary"].get<bool>()) << st->dump();
  ::close(squatter);
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto s = h_->zkState();
        if (!s || s->generation != 3) return false;
        for (const auto& a : s->async) {
          if (a.id == oldPrimary) return true;
        }
        return false;
      },
      120s))
      << h_->describe();
  EXPECT_TRUE(h_->waitFor([&] { return h_->httpStatus(primary, "/replica") == 200; }, 90s)) << h_->describe();
}

}  // namespace
}  // namespace dugong::e2e
