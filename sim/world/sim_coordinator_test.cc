// The simulated ZooKeeper delivery of both simulators: sessions, what each client hears
// and when, exactly-once answers, and the connection faults a world injects.
#include "sim/world/sim_coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dugong::simworld {
namespace {

class Lines final : public TraceSink {
 public:
  Lines() : TraceSink(false) {}

 protected:
  void record(char, std::string) override {}
};

std::vector<std::string> ids(const PeerList& peers) {
  std::vector<std::string> out;
  for (const auto& p : peers) out.push_back(p.id);
  return out;
}

struct Fixture {
  Fixture()
      : zk(q, rng, rng, lines,
           ZkModel{.connect = {100, 100}, .delivery = {1, 1}, .toServer = {10, 10}, .fromServer = {10, 10},
                   .expiryNoticed = {5, 5}, .reconnect = {20, 20}, .sessionTimeoutMs = 3000},
           hooks()) {
    zk.addHost("node1");
    zk.addHost("node2");
  }
  ZkHooks hooks() {
    ZkHooks h;
    h.deliver = [this](int n, const Event& ev, const std::function<void()>& call) {
      heard[n].push_back(ev);
      call();
    };
    h.identityOf = [this](const std::string& id) -> const PeerIdentity& {
      PeerIdentity& p = identities[id];
      p.id = id;
      return p;
    };
    return h;
  }
  std::unique_ptr<SimCoordinator> member(int n, std::vector<driver::CoordinatorConnection>* connections = nullptr) {
    zk.agentStarts(n);
    auto c = std::make_unique<SimCoordinator>(zk, n);
    driver::CoordinatorCallbacks cb;
    cb.onEvent = [](Event) {};
    cb.onConnection = [connections](driver::CoordinatorConnection conn) {
      if (connections) connections->push_back(conn);
    };
    EXPECT_TRUE(c->join(std::move(cb)));
    return c;
  }
  void runUntil(int64_t t) {
    while (!q.empty() && q.nextAt() <= t) q.runNext();
  }

  EventQueue q;
  Rng rng{1};
  Lines lines;
  std::map<std::string, PeerIdentity> identities;
  std::map<int, std::vector<Event>> heard;
  ZkEnsemble zk;
};

TEST(SimCoordinator, AJoinedClientHearsZkInitializedWithItsElectionNode) {
  Fixture f;
  auto c = f.member(0);
  EXPECT_FALSE(c->status().initialized);
  f.runUntil(1000);
  ASSERT_EQ(f.heard[0].size(), 1u);
  const auto* init = std::get_if<ZkInitialized>(&f.heard[0][0]);
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(ids(init->active), std::vector<std::string>{"node1"});
  EXPECT_TRUE(c->status().initialized);
  EXPECT_TRUE(c->status().connected);
}

TEST(SimCoordinator, AWriteIsAnsweredOnceAndEveryClientHearsOfIt) {
  Fixture f;
  auto c1 = f.member(0);
  auto c2 = f.member(1);
  f.runUntil(1000);
  ClusterState s;
  s.primary.id = "node1";
  std::vector<StateWriteFinished> answers;
  c1->putClusterState(s, -1, "setup", [&](StateWriteFinished r) { answers.push_back(r); });
  EXPECT_TRUE(c1->writePending());
  f.runUntil(2000);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok);
  EXPECT_EQ(answers[0].newVersion, 0);
  ASSERT_FALSE(f.heard[1].empty());
  const auto* changed = std::get_if<ClusterStateChanged>(&f.heard[1].back());
  ASSERT_NE(changed, nullptr);
  EXPECT_EQ(changed->state.version, 0);
  // A second write expecting the creation again loses the race.
  c2->putClusterState(s, -1, "setup too", [&](StateWriteFinished r) { answers.push_back(r); });
  f.runUntil(3000);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_FALSE(answers[1].ok);
  EXPECT_TRUE(answers[1].lostRace);
}

TEST(SimCoordinator, LeavingAnswersAWriteInFlightWithAFailureOnce) {
  Fixture f;
  auto c = f.member(0);
  f.runUntil(1000);
  std::vector<StateWriteFinished> answers;
  c->putClusterState(ClusterState{}, -1, "setup", [&](StateWriteFinished r) { answers.push_back(r); });
  c->leave();
  EXPECT_TRUE(answers.empty()) << "never inside the call";
  f.runUntil(5000);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].ok);
  EXPECT_TRUE(f.zk.election().active().empty());
}

TEST(SimCoordinator, ACutOffClientHearsTheLossThenItsSessionExpiresForTheOthers) {
  Fixture f;
  std::vector<driver::CoordinatorConnection> connections;
  auto c1 = f.member(0, &connections);
  auto c2 = f.member(1);
  f.runUntil(1000);
  f.zk.partition(0, 10000);
  f.runUntil(1000 + 2000);
  ASSERT_EQ(connections.size(), 1u) << "after 2/3 of the session timeout";
  EXPECT_FALSE(connections[0].connected);
  EXPECT_EQ(f.zk.election().active(), (std::vector<std::string>{"node1", "node2"}));
  f.runUntil(1000 + 3000);
  EXPECT_EQ(f.zk.election().active(), std::vector<std::string>{"node2"});
  const auto* active = std::get_if<ActivePeersChanged>(&f.heard[1].back());
  ASSERT_NE(active, nullptr);
  EXPECT_EQ(ids(active->active), std::vector<std::string>{"node2"});
  f.runUntil(20000);  // healed: a new session
  EXPECT_EQ(f.zk.election().active(), (std::vector<std::string>{"node2", "node1"}));
}

// ZooKeeper's client reports the lost connection on its own clock, whatever the server
// did with the session meanwhile: a session expired (by a fault) while its client is cut
// off does not silence that report.
TEST(SimCoordinator, ACutOffClientWhoseSessionExpiresMeanwhileStillHearsTheLoss) {
  Fixture f;
  std::vector<driver::CoordinatorConnection> connections;
  auto c1 = f.member(0, &connections);
  f.runUntil(1000);
  f.zk.partition(0, 10000);
  f.runUntil(1500);
  f.zk.expire(f.zk.client(0).session, "a fault");
  f.runUntil(1000 + 2100);
  ASSERT_EQ(connections.size(), 1u) << "the cut-off client never heard that its connection was lost";
  EXPECT_FALSE(connections[0].connected);
}

// The server expires a session one timeout after it last heard from the client: an
// agent that dies while cut off does not give its session a new lease.
TEST(SimCoordinator, AnAgentDyingWhileCutOffLeavesItsSessionToExpireOnTime) {
  Fixture f;
  auto c1 = f.member(0);
  auto c2 = f.member(1);
  f.runUntil(1000);
  f.zk.partition(0, 10000);
  f.runUntil(2500);
  c1.reset();
  f.zk.agentStops(0);
  f.runUntil(1000 + 3000);
  EXPECT_EQ(f.zk.election().active(), std::vector<std::string>{"node2"})
      << "the session outlived its timeout because its agent died while cut off";
}

TEST(SimCoordinator, PeersWithNoClientHoldAnElectionNode) {
  Fixture f;
  f.zk.joinWithoutClient("node9");
  auto c = f.member(0);
  f.runUntil(1000);
  EXPECT_EQ(ids(f.zk.activePeers()), (std::vector<std::string>{"node9", "node1"}));
  f.zk.leaveWithoutClient("node9");
  EXPECT_EQ(ids(f.zk.activePeers()), std::vector<std::string>{"node1"});
}

}  // namespace
}  // namespace dugong::simworld
