// The cluster-wide replication setting with real agents, ZooKeeper and postgres (issue 42,
// docs/decisions/0079-quorum-commit.md "Phase 5b as built", 0089): three peers whose
// dugong.yaml says nothing of replication (every agent reads every format of the state),
// and a cluster configuration written with `dugong-adm config set` before they start,
// switched to quorum mode and back while they run. With four peers (label full), the
// agents' dugong.yaml says `replication: {mode: sync}` and the cluster's quorum setting
// wins.
//
// What is asserted:
// - refused before anything is written (exit 2, one line, the configuration unchanged):
//   replication.k without a mode when there is no block yet, k not below size, an
//   unknown mode, one key of the block unset alone;
// - `replication.mode=sync` in the cluster configuration: the cluster is set up in sync
//   mode (format 1, a sync), and each agent says it delivered the cluster's setting;
// - every agent publishes the newest state format it reads ("stateFormat": 3);
// - `config set replication.mode=quorum replication.k=1 replication.size=2`: the state
//   becomes format 2 with ANY 1 of 2 members, in the same generation or the next, run by
//   the primary's postgres; `dugong-adm verify` finds no problem, `peers` and `pg-status`
//   show each member as "sync (member i of 2)"; `dugong-adm switchover` (no candidate)
//   makes the first member the primary, with a row written before, still in quorum mode;
// - size raised to 3, more than the peers that may be members: written, with a warning;
//   k = size refused;
// - `replication.mode=sync` again: the state is Manatee's format 1 again, with a sync.
// And with four peers (label full): the set grown to 3 by `replication.size=3`, k raised to
// 2 by `replication.k=2` (a fenced step), then both back (k lowered, a member removed),
// each in the same generation, and the primary's postgres running each rule; then
// `dugong-adm restart --rolling` in quorum mode.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "pg/command.h"
#include "statemachine/cluster_state.h"
#include "tests/e2e/cluster_harness.h"
#include "zk/client.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

class QuorumConfig : public ::testing::Test {
 protected:
  void SetUp() override { start(3, ""); }
  void start(int peers, const std::string& extraConfig) {
    HarnessOptions o;
    o.cluster = "qconfig";
    o.peers = peers;
    o.extraConfig = extraConfig;
    h_ = std::make_unique<Harness>(o);
  }
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe() << "state: " << h_->zkStateText() << "\n";
  }

  pg::CommandResult adm(std::vector<std::string> args) {
    pg::CommandSpec spec;
    spec.argv = {DUGONG_ADM_BINARY, "--zk", h_->zkConnect(), "-c", h_->options().cluster};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = 120s;
    return pg::runCommand(spec);
  }
  std::string configShown() { return adm({"config", "show"}).output; }
  // Refused with exit 2, `why` in its output, and the configuration as it was.
  void expectRefused(std::vector<std::string> args, const std::string& why) {
    const std::string before = configShown();
    auto r = adm(args);
    EXPECT_EQ(r.exitCode, 2) << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("refused, the cluster configuration is unchanged"), std::string::npos) << r.output;
    EXPECT_EQ(configShown(), before);
  }
  std::optional<ClusterState> state() { return h_->zkState(ClusterState::Formats::kSyncAndQuorum); }
  // Waits for a state with `members` members and k (0 members: sync mode with a sync)
  // that the primary's postgres runs.
  std::optional<ClusterState> waitForRule(size_t members, int k, std::chrono::milliseconds timeout) {
    std::optional<ClusterState> s;
    const bool ok = h_->waitFor(
        [&] {
          s = state();
          if (!s) return false;
          auto names = h_->sql(h_->indexOf(s->primary.id), "SHOW synchronous_standby_names", 2s);
          if (!names || names->rows.empty() || !names->rows[0][0]) return false;
          const std::string& text = *names->rows[0][0];
          if (members == 0) return !s->quorum && s->sync && text.find(s->sync->id) != std::string::npos &&
                                   text.rfind("ANY", 0) != 0;
          return s->quorum && s->quorum->k == k && s->quorum->members.size() == members &&
                 text.rfind("ANY " + std::to_string(k) + " (", 0) == 0;
        },
        timeout);
    return ok ? s : std::nullopt;
  }

  std::unique_ptr<Harness> h_;
};

TEST_F(QuorumConfig, ConfigSetSwitchesASyncClusterToQuorumChangesTheSizeAndSwitchesBack) {
  // Before any agent: the rules of the block itself.
  expectRefused({"config", "set", "replication.k=1"}, "name replication.mode too");
  expectRefused({"config", "set", "replication.mode=quorum", "replication.k=2", "replication.size=2"},
                "replication.k (2) must be below replication.size (2)");
  expectRefused({"config", "set", "replication.mode=raft"}, "expected sync or quorum");
  expectRefused({"config", "set", "--unset", "replication.k"}, "--unset replication removes the whole block");
  auto sync = adm({"config", "set", "replication.mode=sync"});
  ASSERT_TRUE(sync.ok()) << sync.output;
  EXPECT_NE(configShown().find("\"format\": 2"), std::string::npos) << configShown();

  // Agents configured with nothing of replication: a Manatee cluster.
  h_->startAll();
  ASSERT_GE(h_->waitForHealthyCluster(2, 180s), 0);
  auto s = waitForRule(0, 1, 60s);
  ASSERT_TRUE(s) << "no sync-mode state run by the primary";
  for (int i = 0; i < h_->size(); ++i) {
    EXPECT_TRUE(h_->waitFor(
        [&] {
          auto st = h_->status(i);
          if (!st) return false;
          const auto& r = (*st)["clusterConfig"]["replication"];
          return r.is_object() && r.value("from", "") == "cluster" && r.value("mode", "") == "sync";
        },
        30s))
        << h_->peer(i).id << " did not deliver the cluster's replication setting";
  }
  s = state();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->quorum) << "sync mode wanted, yet " << h_->zkStateText();
  auto client = zk::Client::connect(h_->zkOptions(), 20s);
  ASSERT_TRUE(client.ok()) << client.error();
  auto nodes = (*client)->electionNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error();
  ASSERT_EQ(nodes->size(), 3u);
  for (const auto& n : *nodes) EXPECT_EQ(nlohmann::json::parse(n.data).value("stateFormat", 0), 3) << n.data;
  const int64_t generation = s->generation;

  // To quorum mode: ANY 1 of 2, in the same generation or the next.
  auto quorum = adm({"config", "set", "replication.mode=quorum", "replication.k=1", "replication.size=2"});
  ASSERT_TRUE(quorum.ok()) << quorum.output;
  EXPECT_NE(quorum.output.find("replication: quorum: a commit waits for 1 of a set of 2 members"), std::string::npos)
      << quorum.output;
  s = waitForRule(2, 1, 90s);
  ASSERT_TRUE(s) << "no ANY 1 of 2 members run by the primary";
  EXPECT_LE(s->generation, generation + 1);
  EXPECT_TRUE(h_->waitFor([&] { return adm({"verify"}).ok(); }, 60s)) << adm({"verify", "-v"}).output;
  auto peers = adm({"peers"});
  EXPECT_TRUE(peers.ok()) << peers.output;
  EXPECT_NE(peers.output.find("sync (member 1 of 2)"), std::string::npos) << peers.output;
  EXPECT_NE(peers.output.find("sync (member 2 of 2)"), std::string::npos) << peers.output;
  auto pgStatus = adm({"pg-status"});
  EXPECT_TRUE(pgStatus.ok()) << pgStatus.output;
  EXPECT_NE(pgStatus.output.find("quorum"), std::string::npos) << pgStatus.output;

  // A switchover in quorum mode, in one command with no candidate: the first member
  // becomes the primary, a row written before is there, and the cluster stays in quorum
  // mode (docs/decisions/0089; before, "there is no sync to switch over to").
  const std::string oldPrimary = s->primary.id, firstMember = s->quorum->members.front().id;
  ASSERT_TRUE(h_->sql(h_->indexOf(oldPrimary), "CREATE TABLE before_switchover (v int); "
                                               "INSERT INTO before_switchover VALUES (42)", 10s).ok());
  auto switchover = adm({"switchover"});
  ASSERT_TRUE(switchover.ok()) << switchover.output;
  s = waitForRule(2, 1, 90s);
  ASSERT_TRUE(s) << "not in quorum mode after the switchover: " << h_->zkStateText();
  EXPECT_EQ(s->primary.id, firstMember) << switchover.output;
  auto row = h_->sql(h_->indexOf(s->primary.id), "SELECT v FROM before_switchover", 10s);
  ASSERT_TRUE(row.ok() && row->rows.size() == 1 && row->rows[0][0]) << (row.ok() ? "no row" : row.error());
  EXPECT_EQ(*row->rows[0][0], "42");
  EXPECT_TRUE(h_->waitFor([&] { return adm({"verify"}).ok(); }, 90s)) << adm({"verify", "-v"}).output;

  // A size larger than the peers that may be members: written, with a warning; k = size
  // refused.
  auto size3 = adm({"config", "set", "replication.size=3"});
  ASSERT_TRUE(size3.ok()) << size3.output;
  EXPECT_NE(size3.output.find("warning: replication.size 3 is more than the 2 present peers that may be members"),
            std::string::npos)
      << size3.output;
  expectRefused({"config", "set", "replication.k=3"}, "must be below replication.size (3)");

  // Back to sync mode: Manatee's bytes again, with a sync.
  auto back = adm({"config", "set", "replication.mode=sync"});
  ASSERT_TRUE(back.ok()) << back.output;
  s = waitForRule(0, 1, 90s);
  ASSERT_TRUE(s) << "not back to a sync-mode state";
  EXPECT_TRUE(h_->zkState(ClusterState::Formats::kSyncOnly)) << "a format-1 reader refuses " << h_->zkStateText();
}

class QuorumConfigFourPeers : public QuorumConfig {
 protected:
  void SetUp() override { start(4, "replication:\n  mode: sync\n"); }
};

TEST_F(QuorumConfigFourPeers, SizeAndKAreChangedOneStepAtATimeInTheSameGeneration) {
  auto set = adm({"config", "set", "replication.mode=quorum", "replication.k=1", "replication.size=2"});
  ASSERT_TRUE(set.ok()) << set.output;
  h_->startAll();
  ASSERT_GE(h_->waitForHealthyCluster(3, 180s), 0);
  auto s = waitForRule(2, 1, 120s);
  ASSERT_TRUE(s) << "no ANY 1 of 2 members";
  const int64_t generation = s->generation;
  for (const auto& [args, members, k] : std::vector<std::tuple<std::vector<std::string>, size_t, int>>{
           {{"replication.size=3"}, 3, 1},
           {{"replication.k=2"}, 3, 2},
           {{"replication.k=1", "replication.size=2"}, 2, 1}}) {
    std::vector<std::string> argv = {"config", "set"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = adm(argv);
    ASSERT_TRUE(r.ok()) << r.output;
    EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
    s = waitForRule(members, k, 120s);
    ASSERT_TRUE(s) << "no ANY " << k << " of " << members << " members after " << args[0];
    EXPECT_EQ(s->generation, generation) << "a membership step needs no new generation";
    EXPECT_TRUE(h_->waitFor([&] { return adm({"verify"}).ok(); }, 60s)) << adm({"verify", "-v"}).output;
  }
  // A rolling restart in quorum mode: the asyncs, the members, then a switchover to the
  // first member (before 0089: "no sync in the cluster state").
  const std::string oldPrimary = s->primary.id;
  auto rolling = adm({"restart", "--rolling"});
  ASSERT_TRUE(rolling.ok()) << rolling.output;
  s = waitForRule(2, 1, 120s);
  ASSERT_TRUE(s) << "not in quorum mode after the rolling restart: " << h_->zkStateText();
  EXPECT_NE(s->primary.id, oldPrimary) << rolling.output;
  EXPECT_TRUE(h_->waitFor([&] { return adm({"verify"}).ok(); }, 90s)) << adm({"verify", "-v"}).output;
}

}  // namespace
}  // namespace dugong::e2e
