// The safety invariants of DESIGN.md ("Safety and liveness"), checked against what the
// simulated world observes. Kept apart from the world so that tests can feed it
// hand-made histories and see it catch each kind of violation.
//
// What is checked:
//  - no acknowledged commit is missing from the history of a primary that acknowledges
//    a commit, or from the current primary (the one the cluster state names, once its
//    postgres runs as primary);
//  - at most one peer acknowledges commits for a given generation, and it is the
//    primary that generation's state names;
//  - generations never go backwards, in ZooKeeper or in any peer's view;
//  - a deposed peer never serves;
//  - the initWal of every generation G covers each commit acknowledged in an earlier
//    generation unless G's sync acknowledged it: the next takeover checks only initWal,
//    so a commit beyond it that G's sync may lack can be lost by a second failure
//    (what the fence before the initWal read guards against);
//  - each new generation G+1 is written by the primary or the sync of G, as G+1's
//    primary, when G was not frozen, with the new sync taken from G's asyncs; a sync
//    takeover deposes the old primary and needs the old primary's session to have been
//    gone (or a valid promote of that sync) and the writer's WAL >= G's initWal; a
//    primary takeover needs the old sync's session to have been gone (or a valid
//    promote of async[0]).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/cluster_state.h"
#include "statemachine/time_format.h"
#include "sim/world/wal.h"

namespace dugong::clustersim {

using simworld::Wal;
using simworld::WalMark;

// The sync of a quorum generation in the initWal coverage rule: no standby's name, so
// that no acknowledgement is excused (docs/decisions/0079-quorum-commit.md, W).
inline constexpr const char* kNoSyncInQuorumMode = "(quorum: no sync)";

struct Violation {
  std::string invariant;  // short name, stable: used to compare runs when shrinking
  std::string detail;
  EpochMs at = 0;
};

// One successful test-and-set of the cluster-state node.
struct StateWrite {
  EpochMs at = 0;                      // when ZooKeeper applied it
  EpochMs issuedAt = 0;                // when the writer decided on it
  std::string writer;                  // a peer id, or "operator"
  std::optional<ClusterState> before;  // the state it replaced (absent: created the node)
  ClusterState after;
  std::optional<WalPosition> writerWal;  // the writer's own WAL when it decided
};

// Was this peer's election node absent from ZooKeeper at some instant in [from, to]?
using AbsenceOracle = std::function<bool(const std::string& id, EpochMs from, EpochMs to)>;

class InvariantChecker {
 public:
  // `takeoverRules`: also check how each generation was declared; without it only the
  // consequences (lost commits, two writers, ...) are checked.
  explicit InvariantChecker(AbsenceOracle wasAbsent, bool takeoverRules = true)
      : wasAbsent_(std::move(wasAbsent)), takeoverRules_(takeoverRules) {}

  // A commit acknowledged by `peer`, acting as primary of `generation` (its own view),
  // whose history is `wal`. `deposed`: the peer's own state machine says it is deposed.
  // `statePrimaryOfGeneration`: the primary ZooKeeper named for that generation, if
  // such a generation was ever written.
  // `standby` is the synchronous standby whose copy acknowledged it ("" when the
  // primary writes alone).
  void onAck(EpochMs at, const std::string& peer, int64_t generation, const WalMark& mark, const Wal& wal,
             bool deposed, const std::optional<std::string>& statePrimaryOfGeneration,
             const std::string& standby = "");

  // The current primary's history must hold every acknowledged commit.
  void checkCurrentPrimary(EpochMs at, const std::string& peer, const Wal& wal);
  // The generation's primary, running as such, holds its generation's history: its WAL is
  // on initTimeline at initWal (else its restart refuses its own data, pg/plan/transition.h,
  // and no later takeover can check against it).
  void checkPrimaryHistory(EpochMs at, const std::string& peer, const Wal& wal, const ClusterState& state);

  // A peer's view of the cluster state (per incarnation of its agent).
  void onPeerView(EpochMs at, const std::string& peer, uint64_t incarnation, int64_t generation);

  // A peer whose state machine says deposed has a writable postgres.
  void onDeposedWritable(EpochMs at, const std::string& peer);

  void onStateWrite(const StateWrite& w);

  // Anything else the world finds wrong (a fatal error, a liveness failure).
  void fail(EpochMs at, std::string invariant, std::string detail);

  bool ok() const { return violations_.empty(); }
  const std::vector<Violation>& violations() const { return violations_; }
  std::optional<WalMark> frontier() const { return frontier_ ? std::optional<WalMark>(frontier_->mark) : std::nullopt; }
  int64_t acks() const { return acks_; }

 private:
  // An acknowledgement, described only when a violation is reported (thousands pass).
  struct AckRecord {
    WalMark mark;
    EpochMs at = 0;
    std::string peer;
    int64_t generation = 0;
    std::string standby;
    std::string describe() const;
  };

  void takeoverChecks(const StateWrite& w);
  void standbyTakeoverChecks(const StateWrite& w, bool wasPrimary);
  void checkAckCoveredByInitWal(EpochMs at, const AckRecord& ack, int64_t generation);

  // A generation's initWal (in WAL records) and sync, for the initWal coverage rule.
  struct GenerationCover {
    uint64_t initWalRecords = 0;
    std::string sync;
  };
  std::map<int64_t, GenerationCover> covers_;
  // The furthest commit acknowledged per (generation of the acknowledging primary,
  // standby that had it).
  std::map<std::pair<int64_t, std::string>, AckRecord> furthestAck_;

  AbsenceOracle wasAbsent_;
  bool takeoverRules_ = true;
  std::vector<Violation> violations_;
  std::optional<AckRecord> frontier_;  // the latest acknowledged commit; all others precede it
  std::map<int64_t, std::string> ackerOfGeneration_;
  std::map<std::string, std::pair<uint64_t, int64_t>> views_;  // peer -> (incarnation, generation)
  std::map<int64_t, EpochMs> generationStart_;
  int64_t lastGeneration_ = 0;
  int64_t acks_ = 0;
};

}  // namespace dugong::clustersim
