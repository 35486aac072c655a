// The scripted source of a simulated standby cluster (docs/decisions/0083-standby-cluster.md
// 8.1; phase 1 of the simulator, "Phase 6 as built"): three source hosts, each a PgServer
// in the world's PgFleet (so streaming, timelines and the cascade are the fleet's model,
// and a standby leader streams from a source host as a standby streams from a peer),
// driven by a small controller that is not dugong:
// - its primary appends records every replication tick at a drawn rate; its sync streams
//   from it synchronously (a record is acknowledged once the sync holds it: the source's
//   acknowledged commits), its async from the sync;
// - failover: the primary's host dies; after a drawn delay the sync is promoted (a new
//   timeline at its last whole record: the old primary's tail beyond it is gone) and the
//   async becomes the sync; the old primary's host comes back later as the async, rewound
//   onto the new history;
// - switchover (a clean stop of the primary: its sync receives everything first), sync
//   replacement (the async becomes the sync, the old sync the async), cut and heal (the
//   source's hosts and its ensemble unreachable from the standby cluster's hosts);
// - demotion (the planned switch of sites, 0083 5.3): its producer stops, its primary
//   writes a last record (its shutdown checkpoint, `demotedAt`) that its sync receives
//   before it stops, then runs in recovery with nothing to stream from; its state becomes a
//   standby state of the cluster under test with `demotedAt`, as a demoted dugong
//   cluster's (0083 5.2).
// Its state (a normal dugong state: generation, primary, sync, async) and its election
// (the present peers) are what its ensemble holds (`ensemble()`, zookeeper.h's data), read
// by the standby cluster's agents as the real agent reads a `dugong://` source: a
// read-only poll once a second (zk/source_watch.h), modelled by the world
// (sim/cluster: HostCoordinator), never more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/cluster_state.h"
#include "statemachine/standby.h"
#include "sim/world/rng.h"
#include "sim/world/sim_postgres.h"
#include "sim/world/trace_sink.h"
#include "sim/world/wal.h"
#include "sim/world/zookeeper.h"

namespace dugong::simworld {

// How the scripted source behaves (a seeded range each).
struct SourceModel {
  // The primary's write rate, records per replication tick (10 ms): about as often as the
  // client commits on a normal cluster's primary (a larger WAL costs every copy and read).
  Latency recordsPerTick = {0, 1};
  Latency failoverDelay = {300, 4000};  // the primary's host dies -> its sync is promoted
  Latency hostBack = {1000, 8000};      // a dead primary's host back as the async
};

class SimSource {
 public:
  static constexpr int kHosts = 3;
  // Record ids of the source's commits: never a client commit's id.
  static constexpr uint64_t kFirstRecordId = 1ULL << 61;

  // Adds the source's hosts src1..src3 to `fleet` (after the world's own), set up and
  // running: src1 primary, src2 its sync, src3 async from src2; generation 1.
  SimSource(PgFleet& fleet, Rng& rng, TraceSink& trace, SourceModel model = {});

  // How a standby cluster's dugong.yaml names it (dugong://zk-src:2181/dugong/source).
  static StandbySource standbySource();

  // One replication tick (after the fleet streamed): the primary writes, records the
  // sync holds are acknowledged.
  void tick();

  // The faults (sim/cluster/faults/standby.cc). Each is refused (false) while the source
  // cannot carry it out now (a failover in progress, a host down).
  bool failover();
  bool switchover();
  bool replaceSync();
  void cut() {
    cut_ = true;
    changedAt_ = fleet_.now();
  }
  void heal() {
    cut_ = false;
    changedAt_ = fleet_.now();
  }
  // The source goes for good (with promote-cluster --source-gone): every host stops.
  void stopForGood();
  // demote-cluster toward `toward` (0083 5.2, as a dugong primary carries it out): refused
  // while a failover runs or a host is down. Its state names `toward` as its source.
  bool demote(const StandbySource& toward);

  bool isCut() const { return cut_; }
  bool gone() const { return gone_; }
  bool failingOver() const { return failingOver_; }
  const std::optional<DemotionPoint>& demotedAt() const { return demotedAt_; }
  // The source peer whose postgres accepts writes at this instant (runs as primary, out of
  // recovery, writable), whether or not this cluster can reach it: what two-writable-sites
  // checks (0083 N2). None while it fails over, once demoted or gone.
  std::optional<std::string> writablePrimary() const;
  // When its state, its election's primary or its reachability last changed (world ms).
  int64_t changedAt() const { return changedAt_; }
  // What its ensemble holds: the state node and the election.
  const ZkStateNode& stateNode() const { return state_; }
  bool present(const std::string& id) const { return election_.holds(id); }
  const ClusterState& state() const { return current_; }
  // The fleet's host of source peer `id`, or -1.
  int hostOf(const std::string& id) const;
  const PgServer& server(const std::string& id) const;
  // The source's history now: the WAL of its primary (the sync's while it has none).
  const Wal& history() const;
  // Its acknowledged commits (in order) and the last one.
  const std::vector<WalMark>& acknowledged() const { return acked_; }
  // When its sync last changed (a failover, a switchover, a replacement), and whether
  // its last failover promoted a sync of less than `windowMs` (the N4 race: a standby
  // leader may still stream from the old sync, ahead of the new one).
  int64_t syncChangedAt() const { return syncChangedAt_; }
  int64_t lastFailoverAt() const { return lastFailoverAt_; }
  bool lastFailoverInWindow(int64_t windowMs) const {
    return lastFailoverAt_ >= 0 && lastFailoverAt_ - syncChangedBeforeFailover_ < windowMs;
  }

  static PeerIdentity identity(int i);  // src<i+1>

 private:
  PgServer& pg(int i) { return fleet_.server(first_ + i); }
  int indexOf(const std::string& id) const;
  void publish(const std::string& why);
  void promote(int i);
  void rejoinAsAsync(int i);
  void acknowledgeWhatTheSyncHolds();

  PgFleet& fleet_;
  Rng& rng_;
  TraceSink& trace_;
  SourceModel model_;
  int first_ = 0;               // the fleet's host of src1
  PgServer servers_[kHosts];
  ClusterState current_;
  ZkStateNode state_;
  ZkElection election_;
  uint64_t sessions_[kHosts] = {0, 0, 0};
  uint64_t nextSession_ = 1;
  std::vector<WalMark> waiting_;
  std::vector<WalMark> acked_;
  uint64_t nextRecord_ = kFirstRecordId;
  bool cut_ = false;
  bool gone_ = false;
  bool failingOver_ = false;
  int64_t syncChangedAt_ = 0;
  int64_t syncChangedBeforeFailover_ = 0;
  int64_t lastFailoverAt_ = -1;
  int64_t changedAt_ = 0;
  std::optional<DemotionPoint> demotedAt_;
};

}  // namespace dugong::simworld
