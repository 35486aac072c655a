// The Session against a real standalone ZooKeeper.
#include "zk/session.h"

#include <gtest/gtest.h>

#include "tests/support/tcp_proxy.h"
#include "zk/handle_closer.h"
#include "zk/session_impl.h"
#include "zk/test_util.h"

namespace dugong::zk {
namespace {

using namespace test;
using testing::ZooKeeperCluster;

// A case works on the run's shared server under a root of its own (CaseZooKeeper), or,
// when it stops, pauses or cuts its server, on one of its own: it sets `zk` first.
class SessionTest : public ::testing::Test {
 protected:
  std::string connect() { return zk ? zk->connectString() : shared.connectString(); }

  std::unique_ptr<Peer> startPeer(const std::string& id, int sessionTimeoutMs = 4000) {
    auto p = std::make_unique<Peer>(io, options(connect(), "c1", sessionTimeoutMs), id);
    p->start();
    EXPECT_TRUE(p->waitInit()) << id << " was not initialized";
    return p;
  }

  boost::asio::io_context io;
  CaseZooKeeper shared;
  std::unique_ptr<ZooKeeperCluster> zk;
};

TEST_F(SessionTest, FirstInitHasNoStateAndItselfAsTheOnlyPeer) {
  auto a = startPeer("a");
  auto init = a->all<ZkInitialized>().at(0);
  EXPECT_FALSE(init.state.exists);
  EXPECT_EQ(ids(init.active), std::vector<std::string>{"a"});
  EXPECT_EQ(init.active[0].toJson(), peer("a").toJson());

  auto st = a->session().status();
  EXPECT_TRUE(st.connected);
  EXPECT_TRUE(st.initialized);
  EXPECT_EQ(st.electionNode.rfind("/dugong/c1/election/a-", 0), 0u) << st.electionNode;

  // The node holds the identity JSON and the newest state format this build reads (every
  // format up to it: dugong-adm's check before `config set replication.mode=quorum`,
  // docs/decisions/0089), and belongs to the session.
  auto c = client(connect(), "c1");
  auto nodes = c->electionNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error();
  ASSERT_EQ(nodes->size(), 1u);
  nlohmann::json expected = peer("a").toJson();
  expected["stateFormat"] = 3;
  EXPECT_EQ(nlohmann::json::parse(nodes->at(0).data), expected);
  EXPECT_EQ(nodes->at(0).ephemeralOwner, st.sessionId);
}

TEST_F(SessionTest, ElectionOrderIsSessionOrderAcrossSessions) {
  // Ids that sort the other way round from the order the peers join.
  auto z = startPeer("z");
  auto m = startPeer("m");
  auto a = startPeer("a");
  EXPECT_EQ(a->active(), (std::vector<std::string>{"z", "m", "a"}));
  ASSERT_TRUE(runUntil(io, [&] { return z->active().size() == 3; }));
  EXPECT_EQ(z->active(), (std::vector<std::string>{"z", "m", "a"}));
  // z saw m join, then a: two changes, in order.
  auto changes = z->all<ActivePeersChanged>();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(ids(changes[0].active), (std::vector<std::string>{"z", "m"}));
  EXPECT_EQ(ids(changes[1].active), (std::vector<std::string>{"z", "m", "a"}));

  // m leaves (its session closes) and comes back at the end of the line.
  m.reset();
  ASSERT_TRUE(runUntil(io, [&] { return z->active() == std::vector<std::string>{"z", "a"}; }));
  m = startPeer("m");
  EXPECT_EQ(m->active(), (std::vector<std::string>{"z", "a", "m"}));
  ASSERT_TRUE(runUntil(io, [&] { return a->active() == std::vector<std::string>{"z", "a", "m"}; }));

  auto peers = client(connect(), "c1")->activePeers();
  ASSERT_TRUE(peers.ok());
  EXPECT_EQ(ids(*peers), (std::vector<std::string>{"z", "a", "m"}));
}

TEST_F(SessionTest, NoEventWhenAWatchFiresButThePeersDidNotChange) {
  auto a = startPeer("a");
  size_t mark = a->events.size();
  // Children of the election dir that are not peers fire the child watch but change
  // no peer: one whose name is not "<id>-<seq>", one whose data is not an identity.
  // (A Client rooted there creates them as its persistent nodes.)
  ASSERT_TRUE(client(connect(), "c1")->ensureLayout().ok());
  for (const char* junk : {"/dugong/c1/election/junk", "/dugong/c1/election/x-0000000099"}) {
    ZkOptions o = options(connect(), "");
    o.root = junk;
    auto c = Client::connect(o);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->ensureLayout().ok());
  }
  // Then a real peer joins: exactly one event, with the real change.
  auto b = startPeer("b");
  ASSERT_TRUE(runUntil(io, [&] { return a->active().size() == 2; }));
  // Any stray re-read of a's would be delivered before the state change its own write
  // causes (one io_context, events in order).
  ASSERT_TRUE(a->put(state(1), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().exists; }));
  auto changes = a->all<ActivePeersChanged>(mark);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(ids(changes[0].active), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a->all<ClusterStateChanged>(mark).size(), 1u);
  EXPECT_EQ(a->count(mark), 2);
}

TEST_F(SessionTest, ManyQuickChangesLoseNoFinalState) {
  auto a = startPeer("a");
  auto c = client(connect(), "c1");
  ASSERT_TRUE(c->putState(state(1), -1).ok);
  int32_t version = 0;
  for (int g = 2; g <= 150; ++g) {
    auto w = c->putState(state(g), version);
    ASSERT_TRUE(w.ok) << w.error;
    version = w.newVersion;
  }
  std::string finalBytes = state(150).serialize();
  ASSERT_TRUE(runUntil(io, [&] { return a->state().version == version; }));
  EXPECT_EQ(a->state().data, finalBytes);
  // Versions only grow, and no event repeats the data of the one before.
  auto changes = a->all<ClusterStateChanged>();
  ASSERT_FALSE(changes.empty());
  for (size_t i = 1; i < changes.size(); ++i) {
    EXPECT_GT(changes[i].state.version, changes[i - 1].state.version);
    EXPECT_NE(changes[i].state.data, changes[i - 1].state.data);
  }
  auto parsed = ClusterState::parse(a->state().data);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->generation, 150);
}

TEST_F(SessionTest, ConcurrentTestAndSetWritersExactlyOneWinsPerVersion) {
  std::vector<std::unique_ptr<Peer>> peers;
  for (const char* id : {"a", "b", "c", "d"}) peers.push_back(startPeer(id));
  int32_t version = -1;
  for (int round = 1; round <= 5; ++round) {
    std::vector<std::optional<StateWriteFinished>> results(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      peers[i]->session().putClusterState(state(round, "a", std::string(1, static_cast<char>('b' + i % 3))), version,
                                          [&results, i](StateWriteFinished f) { results[i] = f; });
    }
    ASSERT_TRUE(runUntil(io, [&] {
      for (auto& r : results) {
        if (!r) return false;
      }
      return true;
    }));
    int winners = 0;
    for (auto& r : results) {
      if (r->ok) {
        ++winners;
        version = r->newVersion;
      } else {
        EXPECT_TRUE(r->lostRace) << r->error;
      }
    }
    EXPECT_EQ(winners, 1) << "round " << round;
  }
  EXPECT_EQ(version, 4);  // created at 0, then four updates
  auto history = client(connect(), "c1")->history();
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 5u);  // one record per winning write, none for the losers
}

TEST_F(SessionTest, HistoryIsWrittenWithTheStateInOneMultiOp) {
  auto a = startPeer("a");
  auto w1 = a->put(state(1), -1, "bootstrap");
  ASSERT_TRUE(w1.ok) << w1.error;
  EXPECT_EQ(w1.newVersion, 0);
  auto w2 = a->put(state(2, "b", "a"), 0, "takeover");
  ASSERT_TRUE(w2.ok) << w2.error;
  EXPECT_EQ(w2.newVersion, 1);
  // Losing writes leave no history: a stale version, and a create of an existing state.
  auto stale = a->put(state(3), 0, "stale");
  EXPECT_FALSE(stale.ok);
  EXPECT_TRUE(stale.lostRace);
  auto create = a->put(state(3), -1, "create again");
  EXPECT_FALSE(create.ok);
  EXPECT_TRUE(create.lostRace);

  auto c = client(connect(), "c1");
  auto history = c->history();
  ASSERT_TRUE(history.ok()) << history.error();
  ASSERT_EQ(history->size(), 2u);
  auto r1 = nlohmann::json::parse(history->at(0).data);
  auto r2 = nlohmann::json::parse(history->at(1).data);
  EXPECT_EQ(r1["state"], state(1).toJson());
  EXPECT_EQ(r1["reason"], "bootstrap");
  EXPECT_EQ(r2["state"], state(2, "b", "a").toJson());
  EXPECT_EQ(r2["reason"], "takeover");
  EXPECT_TRUE(parseTime(r2["time"].get<std::string>()).ok());
  EXPECT_LT(history->at(0).sequence, history->at(1).sequence);
  auto now = c->readState();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->data, state(2, "b", "a").serialize());
  EXPECT_EQ(now->version, 1);
}

TEST_F(SessionTest, MalformedStateIsDeliveredAsBytesThatFailToParseClearly) {
  auto c = client(connect(), "c1");
  ASSERT_TRUE(c->putStateBytes("{\"generation\": 1, oops", -1).ok);
  auto a = startPeer("a");
  auto init = a->all<ZkInitialized>().at(0);
  ASSERT_TRUE(init.state.exists);
  auto parsed = ClusterState::parse(init.state.data);
  ASSERT_FALSE(parsed.ok());
  EXPECT_FALSE(parsed.error().empty());

  // Valid JSON with a bad schema, then a good state: the session keeps going.
  ASSERT_TRUE(c->putStateBytes(R"({"generation": "two"})", 0).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().version == 1; }));
  auto bad = ClusterState::parse(a->state().data);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("generation"), std::string::npos) << bad.error();
  ASSERT_TRUE(c->putState(state(3), 1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().version == 2; }));
  EXPECT_TRUE(ClusterState::parse(a->state().data).ok());
  // And the adapter can repair it with a test-and-set.
  EXPECT_TRUE(a->put(state(4), 2).ok);
}

TEST_F(SessionTest, StateCreatedAfterInitIsDeliveredOnce) {
  auto b = startPeer("b");
  EXPECT_FALSE(b->state().exists);
  auto c = client(connect(), "c1");
  ASSERT_TRUE(c->putState(state(1), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return b->state().exists; }));
  EXPECT_EQ(b->state().version, 0);
  EXPECT_EQ(b->state().data, state(1).serialize());
  ASSERT_TRUE(c->putState(state(2), 0).ok);
  ASSERT_TRUE(runUntil(io, [&] { return b->state().version == 1; }));
  EXPECT_EQ(b->all<ClusterStateChanged>().size(), 2u);
}

// A watched node (the cluster configuration): its absence, then each version written by
// a tool (a test-and-set with a history record), delivered once each; a lost race
// writes nothing.
TEST_F(SessionTest, AWatchedNodeIsDeliveredAtEachChange) {
  auto p = std::make_unique<Peer>(io, options(connect(), "c1"), "a");
  std::vector<StateNode> seen;
  p->session().watchNode(Layout("/dugong/c1").config(), [&](StateNode n) { seen.push_back(std::move(n)); });
  p->start();
  ASSERT_TRUE(p->waitInit());
  ASSERT_TRUE(runUntil(io, [&] { return seen.size() == 1; }));
  EXPECT_FALSE(seen[0].exists);
  auto c = client(connect(), "c1");
  ASSERT_TRUE(c->putConfigBytes("v1", -1, "first").ok);
  ASSERT_TRUE(runUntil(io, [&] { return seen.size() == 2; }));
  EXPECT_EQ(seen[1].data, "v1");
  EXPECT_EQ(seen[1].version, 0);
  auto lost = c->putConfigBytes("stale", -1, "second create");
  EXPECT_TRUE(lost.lostRace) << lost.error;
  ASSERT_TRUE(c->putConfigBytes("v2", 0, "second").ok);
  ASSERT_TRUE(runUntil(io, [&] { return seen.size() == 3; }));
  EXPECT_EQ(seen[2].data, "v2");
  auto history = c->configHistory();
  ASSERT_TRUE(history.ok()) << history.error();
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(history->at(1).data)["reason"], "second");
  EXPECT_EQ(c->readConfig()->data, "v2");
}

TEST_F(SessionTest, ServerRestartIsNotExpiryWritesFailFastMeanwhile) {
  zk = ZooKeeperCluster::standalone();  // stopped, paused or cut
  auto a = startPeer("a", 10000);
  auto b = startPeer("b", 10000);
  ASSERT_TRUE(a->put(state(1), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().exists && b->state().exists && a->active().size() == 2; }));
  size_t markA = a->events.size();
  size_t markB = b->events.size();
  auto sessionA = a->session().status().sessionId;
  auto nodeA = a->session().status().electionNode;

  zk->stop(0);
  ASSERT_TRUE(runUntil(io, [&] { return !a->session().status().connected; }));
  auto w = a->put(state(2), 0);
  EXPECT_FALSE(w.ok);
  EXPECT_FALSE(w.lostRace);
  EXPECT_NE(w.error.find("not connected"), std::string::npos) << w.error;

  zk->start(0);
  ASSERT_TRUE(runUntil(io, [&] {
    return a->session().status().connected && b->session().status().connected;
  }));
  // Same session, same node: nothing for the state machine.
  EXPECT_EQ(a->session().status().sessionId, sessionA);
  EXPECT_EQ(a->session().status().electionNode, nodeA);
  EXPECT_EQ(a->session().status().sessionsOpened, 1);
  // Writes work again, and the only event is the one the write causes.
  auto w2 = a->put(state(2), 0);
  ASSERT_TRUE(w2.ok) << w2.error;
  ASSERT_TRUE(runUntil(io, [&] { return a->state().version == 1 && b->state().version == 1; }));
  EXPECT_EQ(a->count(markA), 1);
  EXPECT_EQ(b->count(markB), 1);
  EXPECT_EQ(a->all<ClusterStateChanged>(markA).size(), 1u);
}

TEST_F(SessionTest, ExpiryForcedFromOutsideRecoversWithANewNodeAndAFreshInit) {
  auto a = startPeer("a", 2000);
  auto b = startPeer("b", 2000);
  ASSERT_TRUE(a->put(state(1), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return b->active().size() == 2 && b->state().exists; }));
  auto before = a->session().status();
  auto creds = a->session().credentials();
  ASSERT_TRUE(creds.has_value());

  auto closed = closeSessionFromOutside(connect(), creds->sessionId, creds->password);
  ASSERT_TRUE(closed.ok()) << closed.error();

  // b is told that a left, then that a is back (after a's new session).
  ASSERT_TRUE(runUntil(io, [&] { return a->inits() == 2; }));
  auto fresh = a->all<ZkInitialized>().at(1);
  EXPECT_TRUE(fresh.state.exists);
  EXPECT_EQ(fresh.state.data, state(1).serialize());
  auto after = a->session().status();
  EXPECT_NE(after.sessionId, before.sessionId);
  EXPECT_NE(after.electionNode, before.electionNode);
  EXPECT_EQ(after.sessionsOpened, 2);
  EXPECT_EQ(ids(fresh.active), (std::vector<std::string>{"b", "a"}));
  ASSERT_TRUE(runUntil(io, [&] { return b->active() == std::vector<std::string>{"b", "a"}; }));
  bool sawLeave = false;
  for (auto& ch : b->all<ActivePeersChanged>()) sawLeave = sawLeave || ids(ch.active) == std::vector<std::string>{"b"};
  EXPECT_TRUE(sawLeave);
  // The old node is gone; exactly one node for a.
  auto nodes = client(connect(), "c1")->electionNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ("/dugong/c1/election/" + nodes->at(1).node, after.electionNode);
  // And a writes again in its new session.
  EXPECT_TRUE(a->put(state(2), 0).ok);
}

TEST_F(SessionTest, WriteInterruptedByAHungServerIsResolvedByReadingTheState) {
  zk = ZooKeeperCluster::standalone();  // stopped, paused or cut
  auto a = startPeer("a", 2000);
  ASSERT_TRUE(a->put(state(1), -1).ok);
  std::optional<StateWriteFinished> result;
  zk->pause(0);
  a->session().putClusterState(state(2), 0, [&](StateWriteFinished f) { result = f; });
  // The client gives up on the hung server (2/3 of the session timeout), and the
  // server, resumed, may or may not have applied the write. Resume it once the
  // connection is lost, so that the session survives.
  ASSERT_TRUE(runUntil(io, [&] { return !a->session().status().connected || result.has_value(); }));
  zk->resume(0);
  ASSERT_TRUE(runUntil(io, [&] { return result.has_value(); }));
  auto now = client(connect(), "c1")->readState();
  ASSERT_TRUE(now.ok());
  // Whatever happened, the report matches ZooKeeper.
  if (result->ok) {
    EXPECT_EQ(now->data, state(2).serialize());
    EXPECT_EQ(now->version, result->newVersion);
  } else {
    EXPECT_EQ(now->data, state(1).serialize()) << result->error;
    EXPECT_EQ(now->version, 0);
  }
}

// A rewrite that changes nothing but the version (a
// primary's confirmation on a new session, a settle write) has the bytes of the state it
// expects. Interrupted before it reached ZooKeeper, it was reported applied, at the old
// version, because the bytes read back matched: a takeover at that version could still land.
TEST_F(SessionTest, AnInterruptedUnchangedRewriteThatNeverReachedZooKeeperIsNotReportedApplied) {
  zk = ZooKeeperCluster::standalone();  // stopped, paused or cut
  dugong::testing::TcpProxy proxy("127.0.0.1", zk->clientPort(0));
  Peer a(io, options("127.0.0.1:" + std::to_string(proxy.port()), "c1", 6000), "a");
  a.start();
  ASSERT_TRUE(a.waitInit());
  ASSERT_TRUE(a.put(state(1), -1).ok);
  const int lostBefore = a.session().status().sessionsLost;
  std::optional<StateWriteFinished> result;
  proxy.cut();  // the request is dropped on the way: it never reaches the server
  a.session().putClusterState(state(1), 0, [&](StateWriteFinished f) { result = f; });
  ASSERT_TRUE(runUntil(io, [&] { return !a.session().status().connected || result.has_value(); }));
  proxy.heal();  // the same session comes back (within its timeout) and resolves the write
  ASSERT_TRUE(runUntil(io, [&] { return result.has_value(); }));
  // Only a session that survived resolves the write by reading (an expiry fails it anyway).
  ASSERT_EQ(a.session().status().sessionsLost, lostBefore) << "the session expired: the test proves nothing";
  auto now = client(connect(), "c1")->readState();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->version, 0);
  EXPECT_FALSE(result->ok) << "reported applied at version " << result->newVersion << " while ZooKeeper is at "
                           << now->version;
}

// The regain of the same session is reported once the state has been read again: a
// primary that resumes writes on it decides on the state of now, never on the one from
// before the loss (a promotion carried out meanwhile).
TEST_F(SessionTest, TheRegainOfTheSameSessionIsReportedAfterTheStateIsReadAgain) {
  zk = ZooKeeperCluster::standalone();  // stopped, paused or cut
  dugong::testing::TcpProxy proxy("127.0.0.1", zk->clientPort(0));
  Peer a(io, options("127.0.0.1:" + std::to_string(proxy.port()), "c1", 8000), "a");
  a.start();
  ASSERT_TRUE(a.waitInit());
  ASSERT_TRUE(a.put(state(1), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a.state().version == 0; }));
  const int lostBefore = a.session().status().sessionsLost;
  std::vector<std::pair<bool, int32_t>> changes;  // connected, and the state version the peer had then
  a.session().setConnectionCallback([&](ConnectionChange c) { changes.emplace_back(c.connected, a.state().version); });
  proxy.cut();
  ASSERT_TRUE(runUntil(io, [&] { return !changes.empty(); }));
  ASSERT_TRUE(client(connect(), "c1")->putState(state(2), 0).ok);
  proxy.heal();
  ASSERT_TRUE(runUntil(io, [&] { return changes.size() >= 2; }));
  ASSERT_EQ(a.session().status().sessionsLost, lostBefore) << "the session expired: the test proves nothing";
  EXPECT_FALSE(changes[0].first);
  EXPECT_TRUE(changes[1].first);
  EXPECT_EQ(changes[1].second, 1) << "the regain was reported before the state written during the loss was read";
}

// The C client leaves the completions of requests answered (or failed) as a handle
// closes in a queue that nobody runs any more (its completion thread has ended): what
// such a request carries must still be freed once the close returned. A race: sessions
// are closed one after another right after requests were sent.
TEST_F(SessionTest, ClosingWhileAnswersArriveLeavesNoRequestBehind) {
  for (int i = 0; i < 40; ++i) {
    Peer a(io, options(connect(), "c1", 8000), "a");
    a.start();
    ASSERT_TRUE(a.waitInit());
    a.session().putClusterState(state(i + 1), i - 1, [](const StateWriteFinished&) {}, "closing");
    a.session().watchNode("/dugong/c1/election", [](const StateNode&) {});
    a.session().putClusterState(state(i + 1), i - 1, [](const StateWriteFinished&) {}, "refused: one in flight");
  }
  ASSERT_TRUE(detail::waitForClosedHandles(kWait));
  // An answer that came before its session ended waits on the io_context, which frees
  // it when it runs (CI once checked before the last one ran).
  EXPECT_TRUE(runUntil(io, [] { return session_internal::callsAlive.load() == 0; }))
      << session_internal::callsAlive.load() << " request(s) outstanding at the close never freed";
}

TEST_F(SessionTest, DigestAuthLetsOnlyTheConfiguredIdentityWrite) {
  ZkOptions secured = options(connect(), "sec");
  secured.auth = DigestAuth{"dugong", "s3cret"};
  Peer a(io, secured, "a");
  a.start();
  ASSERT_TRUE(a.waitInit());
  ASSERT_TRUE(a.put(state(1), -1).ok);

  // Anyone may read.
  auto anon = client(connect(), "sec");
  auto read = anon->readState();
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->data, state(1).serialize());
  // Nobody else may write.
  auto denied = anon->putState(state(2), 0);
  EXPECT_FALSE(denied.ok);
  EXPECT_FALSE(denied.lostRace);
  EXPECT_NE(denied.error.find("ZNOAUTH"), std::string::npos) << denied.error;
  ZkOptions wrong = secured;
  wrong.auth = DigestAuth{"dugong", "guess"};
  auto intruder = Client::connect(wrong);
  ASSERT_TRUE(intruder.ok());
  EXPECT_FALSE((*intruder)->putState(state(2), 0).ok);
  // The same identity may (an operator's dugong-adm).
  auto op = Client::connect(secured);
  ASSERT_TRUE(op.ok());
  auto w = (*op)->putState(state(2), 0);
  EXPECT_TRUE(w.ok) << w.error;
  ASSERT_TRUE(runUntil(io, [&] { return a.state().version == 1; }));
}

TEST_F(SessionTest, InvalidOptionsAreReportedNotRetried) {
  ZkOptions o = options(connect(), "");
  Peer p(io, o, "a");
  auto r = p.session().start();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cluster"), std::string::npos);
  auto w = p.put(state(1), -1);
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.error.find("not running"), std::string::npos) << w.error;
}

// A lost connection under a valid session is reported, and so is the regain of the
// same session (no new ZkInitialized): a primary stops writes on the first and may
// resume on the second.
TEST_F(SessionTest, ConnectionLossAndRegainOfTheSameSessionAreReported) {
  zk = ZooKeeperCluster::standalone();  // stopped, paused or cut
  auto a = startPeer("a", 6000);
  std::vector<ConnectionChange> changes;
  a->session().setConnectionCallback([&](ConnectionChange c) { changes.push_back(c); });
  const int64_t session = a->session().status().sessionId;
  zk->pause(0);
  bool lost = runUntil(io, [&] { return !changes.empty(); }, std::chrono::seconds(20));
  zk->resume(0);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(changes[0].connected);
  EXPECT_EQ(changes[0].sessionId, session);
  EXPECT_GT(changes[0].sessionTimeoutMs, 0);
  ASSERT_TRUE(runUntil(io, [&] { return changes.size() >= 2; }, std::chrono::seconds(20)));
  EXPECT_TRUE(changes[1].connected);
  EXPECT_EQ(changes[1].sessionId, session);
  EXPECT_EQ(a->all<ZkInitialized>().size(), 1u);
  EXPECT_EQ(a->session().status().sessionId, session);
}

// A state node deleted and created again starts at version 0: running peers see both.
TEST_F(SessionTest, DeletedAndRecreatedStateIsSeen) {
  auto a = startPeer("a");
  auto c = client(connect(), "c1");
  ASSERT_TRUE(c->putState(state(1), -1).ok);
  ASSERT_TRUE(c->putState(state(2), 0).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().exists && a->state().version == 1; }));
  ASSERT_TRUE(c->deleteState(1).ok());
  ASSERT_TRUE(runUntil(io, [&] { return !a->state().exists; }));
  ASSERT_TRUE(c->putState(state(7), -1).ok);
  ASSERT_TRUE(runUntil(io, [&] { return a->state().exists; }));
  EXPECT_EQ(a->state().version, 0);
  EXPECT_EQ(ClusterState::parse(a->state().data)->generation, 7);
}

}  // namespace
}  // namespace dugong::zk
