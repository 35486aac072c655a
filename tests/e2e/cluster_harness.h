// End-to-end test harness: a real ZooKeeper, real postgres instances and real `dugong`
// agent processes on loopback, each peer with its own ports and directories. Everything
// is stopped when the harness is destroyed, also when a test fails: agents get SIGKILL,
// postgres an immediate stop, ZooKeeper is killed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pg/testing/pg_test_cluster.h"
#include "pg/testing/test_certs.h"
#include "statemachine/cluster_state.h"
#include "zk/client.h"
#include "zk/testing/zookeeper_server.h"

namespace dugong::e2e {

using namespace std::chrono_literals;

struct HarnessOptions {
  int peers = 3;
  int sessionTimeoutMs = 3000;
  std::string cluster = "e2e";
  int withdrawAfterSeconds = 30;
  // Top-level YAML appended to every agent's configuration (e.g. "rejoin: manual\n").
  std::string extraConfig;
  // Lines appended to every agent's postgres section (e.g. "  bootstrap:\n    method: ...").
  std::string postgresConfig;
  // Lines appended to every agent's http section (e.g. "  auth:\n    tokenFile: /x\n").
  std::string httpConfig;
  // The ZooKeeper connect string given to peer `index`'s agent (default: the ensemble's
  // own), e.g. through a proxy that a partition test can cut.
  std::function<std::string(int index, const std::string& connect)> agentZkConnect;
  // The ZooKeeper servers (default: one, standalone); the agents are told its tickTime
  // (zookeeper.tickTimeMs, the primary's lease). zkConfig: lines appended to every
  // agent's zookeeper section (e.g. "  lease: false\n").
  dugong::testing::ZooKeeperOptions zookeeper;
  std::string zkConfig;
  // Servers of its own (`zookeeper`), started by the harness, instead of a chroot of its
  // own on the server the ctest run shares (the fixture `zookeeper`,
  // zk/testing/shared_zookeeper.h): for a test that stops, kills, restarts or rebuilds
  // them. Options other than the defaults (an ensemble, cuttable links) always get their
  // own; so does a test binary run without ctest.
  bool ownZooKeeper = false;
  // The agents run the real initdb (with --no-sync), each new cluster a database system of
  // its own, instead of a copy of the run's template (pg/testing/initdb_template.h): for a
  // test that tells data directories apart by their system identifier.
  bool realInitdb = false;
  // ZooKeeper digest credentials for the agents (zookeeper.auth, so their nodes get
  // ACLs) and for the harness' own client.
  std::optional<zk::DigestAuth> zkAuth;
  // Every postgres TLS only (postgres.tls): a CA and a certificate for 127.0.0.1 made with
  // openssl, pg_hba hostssl-only, and every connection with sslmode verify-full.
  bool tlsOnly = false;
  // Settings left out of the agents' postgres.settings, so that the cluster-wide
  // configuration (dugong-adm config) decides them (a host's own settings win).
  std::set<std::string> clusterWideSettings;
  // Each agent's stdout and stderr go to a pipe that the harness copies into its log,
  // so that a test can stop reading it (stallAgentLog).
  bool agentLogsThroughPipes = false;
  // The network namespace peer `index`'s agent (and so its postgres and watchdog) runs
  // in: an open fd of /var/run/netns/<name> (tests/support/net_namespace.h); -1 or unset:
  // the test's own. The test relays whatever must cross (its postgres and HTTP ports
  // to the test's loopback, ZooKeeper and the other agents into the namespace).
  std::function<int(int index)> agentNetns;
};

// The harness' end of an agent's log pipe (HarnessOptions::agentLogsThroughPipes).
class LogRelay;

struct E2EPeer {
  pg::testing::PgTestNode* pg = nullptr;  // options, identity, sql(), forceStop()
  std::string id;
  int httpPort = 0;
  std::string configPath;
  std::string logPath;
  pid_t agentPid = -1;
  bool singleton = false;
};

class Harness {
 public:
  explicit Harness(HarnessOptions options = {});
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Adds a peer (config written, agent not started); returns its index.
  int addPeer(bool singleton = false);
  int size() const { return static_cast<int>(peers_.size()); }
  E2EPeer& peer(int i) { return peers_.at(static_cast<size_t>(i)); }
  int indexOf(const std::string& id) const;

  void startAgent(int i);
  void startAll();
  // SIGTERM and wait for the agent to exit (bounded).
  void stopAgent(int i);
  void killAgent(int i);  // SIGKILL
  // SIGKILL of the agent's watchdog, then of the agent: its postgres runs on, stopped by
  // nobody (the state a test needs of an agent that is about to stop postgres).
  void killAgentAndWatchdog(int i);
  // `dugong --config <its config> --leave` (the agent stopped): the peer leaves for good.
  // Returns the command's exit status; its output goes to the agent's log.
  int leaveAgent(int i);
  // The harness stops reading the agent's log pipe and fills it: the agent's next log
  // line blocks the thread that writes it (its loop), as a stuck journald or a log pipe
  // nobody reads does. Needs agentLogsThroughPipes. resumeAgentLog reads it again.
  void stallAgentLog(int i);
  void resumeAgentLog(int i);
  void pauseAgent(int i);  // SIGSTOP
  void resumeAgent(int i);  // SIGCONT
  // SIGKILL of the postmaster (from postmaster.pid).
  void killPostgres(int i);
  bool agentRunning(int i);

  // GET http://127.0.0.1:<httpPort><path>; nullopt when the agent does not answer.
  std::optional<nlohmann::json> status(int i);
  int httpStatus(int i, const std::string& path);
  std::string role(int i);  // "" when the agent does not answer

  // The cluster state in ZooKeeper (nullopt if absent or unreadable).
  std::optional<ClusterState> zkState(ClusterState::Formats formats = ClusterState::Formats::kSyncOnly);
  // The state node's text as it is ("none" when absent or unreadable), for failure messages.
  std::string zkStateText();
  // The cluster's history in ZooKeeper (one entry per state write; empty on error).
  std::vector<zk::HistoryEntry> history();
  // A test-and-set update of the state in ZooKeeper, as an operator would make.
  bool updateState(const std::function<void(ClusterState&)>& change);

  // The connect string of the harness' ZooKeeper, with its chroot on the shared server
  // ("127.0.0.1:2181/dugong-e2e-Ab12Cd"), as dugong-adm's -z takes it.
  std::string zkConnect() const;
  // The ensemble itself, e.g. to stop it for an outage (HarnessOptions::ownZooKeeper;
  // throws std::logic_error on the shared server).
  dugong::testing::ZooKeeperCluster& zookeeper();
  // The ensemble rebuilt empty (ZooKeeperCluster::rebuildEmpty); the harness' own client
  // is replaced, since the rebuilt server refuses one that has seen more than it has.
  void rebuildZooKeeperEmpty();
  // A new client for the harness itself, e.g. once its session expired in an outage
  // (zkState() and history() retry once through it). False if ZooKeeper does not answer.
  bool reconnectClient();
  const HarnessOptions& options() const { return options_; }
  zk::ZkOptions zkOptions() const;

  // Polls `condition` (every 100 ms) until it holds or `timeout` passes.
  bool waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
  // Waits for a writable primary (/primary answers 200) and `replicas` streaming
  // replicas; returns the primary's index, or -1.
  int waitForHealthyCluster(int replicas, std::chrono::milliseconds timeout = 120s);
  // The index of the peer whose /primary answers 200, or -1.
  int writablePrimary();

  // The index of the peer holding `role` ("primary", "sync", "async", "deposed") in the
  // cluster state in ZooKeeper (the first async for "async"), or -1.
  int indexWithRole(const std::string& role);
  // The integers in the first column of `query` on a peer (empty on error).
  std::set<int> intColumn(int i, const std::string& query);

  // SQL on a peer's postgres as the superuser.
  Result<pg::QueryResult> sql(int i, const std::string& query, std::chrono::milliseconds timeout = 10s);
  // A connection string naming every peer, with target_session_attrs=read-write and the
  // superuser's password (pg::testing::kTestSuperuserPassword).
  std::string multiHostConninfo() const;

  // The last lines of a peer's agent log (for failure messages).
  std::string logTail(int i, size_t lines = 40) const;
  std::string describe();

 private:
  void writeConfig(const E2EPeer& p) const;

  HarnessOptions options_;
  std::string agentBinDir_;  // postgres' programs, initdb from a template (pg/testing/initdb_template.h)
  std::unique_ptr<dugong::testing::ZooKeeperCluster> zk_;  // null on the shared server
  std::string sharedServer_;  // the shared server's connect string, and this harness' chroot there
  std::string chroot_;
  std::unique_ptr<pg::testing::PgTestCluster> pgs_;
  std::optional<pg::testing::TestCerts> certs_;  // tlsOnly
  std::vector<E2EPeer> peers_;
  std::unique_ptr<zk::Client> client_;
  std::vector<std::unique_ptr<LogRelay>> relays_;  // by peer index, agentLogsThroughPipes
};

}  // namespace dugong::e2e
