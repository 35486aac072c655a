// The simulated world of dugong-sim: one real Peer under test (node1) on a simulated
// ZooKeeper and a simulated postgres, in virtual time. Everything is deterministic.
//
// Conventions (issue 2, and shared/conformance/manatee/README.md), relied on by
// scenario scripts:
// - The N-th identity created is node<N> (or the given name), ip 10.0.0.<N>, pgUrl
//   tcp://postgres@10.0.0.<N>:5432/postgres, zoneId = id. node1 exists from the start.
// - ZooKeeper changes reach the peer on the next step of the event loop; the peer's
//   client initialises 100 ms after startPeer; the peer's writes take 100 ms.
// - Postgres initialises 100 ms after startPeer (not online, not set up); reconfigure,
//   start and stop take 1000 ms each; reading the WAL takes 10 ms and fails offline.
//   When postgres comes online or is reconfigured while this peer is the primary of the
//   current state, its WAL advances by 10. A fence (before a takeover reads initWal)
//   takes 10 ms and moves no WAL: a fenced postgres acknowledges nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/peer.h"

namespace dugong::sim {

class SimWorld {
 public:
  struct Options {
    bool singleton = false;   // the peer under test runs in one-node-write mode
    EpochMs startTime = 1767225600000;  // 2026-01-01T00:00:00Z
  };
  // Called for every line the world logs (peer decisions, events, actions).
  using TraceSink = std::function<void(EpochMs now, const std::string& line)>;

  explicit SimWorld(Options options);

  // Runs a command; the result is JSON (null for commands that print nothing), or an
  // error message.
  Result<nlohmann::json> run(const std::string& cmd, const nlohmann::json& args);

  // Advances virtual time by `ms`, running everything due.
  void advance(int64_t ms);
  // Runs until nothing is pending; false if that takes more than `limitMs`.
  bool runUntilRest(int64_t limitMs);

  EpochMs now() const { return now_; }
  void setTrace(TraceSink sink) { trace_ = std::move(sink); }

 private:
  struct Scheduled {
    EpochMs at;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Scheduled& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void schedule(int64_t delayMs, std::function<void()> fn);
  void deliver(const Event& event, const std::string& what);
  void carryOut(const Action& action);

  // ZooKeeper
  Result<nlohmann::json> writeZk(nlohmann::json state, const std::string& why);
  std::optional<ClusterState> zkState() const;
  void notifyState();
  void notifyActive();
  StateNode stateNode() const;
  PeerList activeList() const;
  bool simulatedPrimaryRunsCluster(const ClusterState& s) const;

  // Identities
  const PeerIdentity& identity(const std::string& id);
  std::optional<std::string> knownId(const nlohmann::json& arg) const;

  // Commands
  Result<nlohmann::json> addPeer(const nlohmann::json& args);
  Result<nlohmann::json> rmPeer(const nlohmann::json& args);
  Result<nlohmann::json> bootstrap(const nlohmann::json& args);
  Result<nlohmann::json> startPeer();
  Result<nlohmann::json> depose();
  Result<nlohmann::json> rebuild(const nlohmann::json& args);
  Result<nlohmann::json> freeze(bool on);
  Result<nlohmann::json> promote(const nlohmann::json& args);
  Result<nlohmann::json> setClusterState(const nlohmann::json& args);
  Result<nlohmann::json> catchUp();
  nlohmann::json peerView() const;
  nlohmann::json zkView(bool verbose) const;

  void log(const std::string& line);

  Options opts_;
  EpochMs now_;
  uint64_t seq_ = 0;
  std::priority_queue<Scheduled, std::vector<Scheduled>, std::greater<>> queue_;
  TraceSink trace_;

  std::map<std::string, PeerIdentity> identities_;
  int identityCount_ = 0;

  // Simulated ZooKeeper.
  nlohmann::json zkData_;  // null: no state node
  int32_t zkVersion_ = -1;
  std::vector<std::string> active_;  // ids in session order
  int historyCount_ = 0;

  // The peer under test and its ZooKeeper client.
  std::unique_ptr<Peer> peer_;
  bool zkClientReady_ = false;
  bool stateNotifyPending_ = false;
  bool activeNotifyPending_ = false;
  int32_t deliveredVersion_ = -1;
  std::vector<std::string> deliveredActive_;

  // Simulated postgres.
  std::optional<PgConfig> pgConfig_;
  bool pgOnline_ = false;
  WalPosition pgWal_;
};

}  // namespace dugong::sim
