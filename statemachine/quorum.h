// Quorum commit's pure rules (docs/decisions/0079-quorum-commit.md): who takes over from
// the members' reports (section 4.3), and which membership step comes next, in which
// order (sections 5.1 and 5.3). Functions of their arguments only: every peer computes the
// same decision from the same state and reports, and the tests drive them directly.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "statemachine/cluster_state.h"
#include "statemachine/takeover_report.h"
#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong {

// The configuration a takeover consults: a format-2 state's quorum, or, for a sync-mode
// state, ({sync}, 1) (Manatee's rule is this one for N = 1); none in one-node-write mode.
std::optional<Quorum> quorumOf(const ClusterState& state);

// q = N - k + 1: any q members and any k members of the set share at least one.
int readQuorum(int members, int k);

// A quorum as the decisions' reasons write it: "ANY 1 (b, c)".
std::string quorumRule(const Quorum& q);

enum class ReplicationMode { kSync, kQuorum };

// What the wanted configuration asks for (the cluster configuration's `replication`
// block): the mode, k and the size of the set.
struct QuorumWanted {
  int k = 1;
  int size = 2;
  ReplicationMode mode = ReplicationMode::kQuorum;
};

// The peers a decision sees: those present (their election nodes, with their current
// identities and tags) and, among them, those whose postgres streams from its upstream,
// and the members the primary judges to acknowledge nothing (after its hysteresis).
struct QuorumPresence {
  PeerList present;
  std::set<std::string> streaming;
  std::set<std::string> stalled;
};

// A takeover decided: `taker` writes `next` (generation G + 1) test-and-set at the version
// it read, with one check per counted report (`checks`: member id and node version).
struct QuorumTakeover {
  PeerIdentity taker;
  ClusterState next;        // initWal L, initTimeline the taker's timeline at L
  WalPosition takerWal;     // the taker's WAL: its promotion point, at or past L
  std::vector<std::pair<std::string, int32_t>> checks;
};

struct QuorumDecision {
  std::optional<QuorumTakeover> takeover;  // none: nobody takes over, `reason` says why
  std::string reason;                      // one line, the same on every peer
  std::vector<std::string> counted;        // the counted reports' members, in set order
};

// The rule of 0079 section 4.3 for generation G of `state` (format 2, or sync mode as
// N = 1): the counted reports are those for G from present members on G's history; with
// fewer than q of them nobody takes over. Otherwise the most advanced counted report B
// (later timeline, then position, ties by set order) must keep every other one and reach
// initWal; L is the j-th highest position on B's history (j = k - (N - r)), at least
// initWal; the taker is B, or `promoteTarget` if named (then only it, if its report is a
// prefix of B's history reaching L), or, if B is tagged nofailover, the most advanced
// untagged prefix of B's history reaching L. The next set is the present members other
// than the taker (none off the history), in order, then present streaming untagged
// asyncs up to the wanted size; k' = min(wanted k, its size); it must not be empty.
// When the takeover starts (the primary gone, not frozen, no promise held) is the
// caller's: this is only who, and with what.
QuorumDecision decideQuorumTakeover(const ClusterState& state, const TakeoverReports& reports,
                                    const QuorumPresence& presence, const QuorumWanted& wanted,
                                    const std::optional<std::string>& promoteTarget = std::nullopt);

// Whether member `self` starts a takeover now (0079 section 4.1): fences itself, reads its
// WAL under the fence and publishes its report. It starts when the primary is gone from
// ZooKeeper (after the driver's grace, unchanged) or a promote request names a member
// (`promoteTarget`, validated by the caller), unless the cluster is frozen or its postgres
// does not run as a member (`pgReady`). A member tagged nofailover starts too: it fences
// and reports like the others, and decideQuorumTakeover never makes it the taker. A
// failsafe promise holds the fence in the driver, as today.
struct MemberTakeoverStart {
  std::optional<std::string> why;      // set: start, for this reason
  std::optional<std::string> blocked;  // set: a reason to start, held back by this
};
MemberTakeoverStart memberTakeoverStart(const ClusterState& state, const std::string& self,
                                        const QuorumPresence& presence,
                                        const std::optional<std::string>& promoteTarget, bool pgReady);

// How a membership step goes (0079 section 5.1). A step that makes postgres acknowledge
// more easily (add a member, lower k) is written, then reloaded once the write is known
// to have landed; one that makes it acknowledge less easily (remove a member, raise k) is
// reloaded, fenced (verified, and the k'-th flush of the new set caught up to the
// primary's flush position at the fence), then written. A re-encoding changes neither
// rule: written only.
enum class StepOrder { kWriteThenReload, kReloadFenceThenWrite, kWriteOnly };

struct MembershipStep {
  enum class Kind { kAdd, kRemove, kRaiseK, kLowerK, kReencode };
  Kind kind;
  std::string member;          // the member added or removed; empty otherwise
  StepOrder order;
  bool endWalsenders = false;  // a raise: the fence ends every member's walsender (P3)
  ClusterState next;           // the state written, the same generation
  std::string reason;          // one line: why, and the rule before and after
};

// The primary's next membership step towards `wanted` (0079 section 5.3), one at a time:
// a gone member removed (if N - 1 >= k and k others stream, so the fence can end); with
// fewer than k members streaming, a streaming async added (or, with none, k lowered); a
// member that acknowledges nothing removed, last in the async chain; the size moved
// towards the wanted size; k towards the wanted k (a raise only while k + 1 < N and k + 1 members stream); for
// wanted sync mode k lowered to 1 and the set shrunk to one, then re-encoded to format 1;
// for wanted quorum mode a sync-mode state re-encoded first. None while frozen, with a
// promote request, in one-node-write mode, or when the state is what is wanted. The
// caller carries the step out in its order and asks again from the state as it is then.
std::optional<MembershipStep> nextMembershipStep(const ClusterState& state, const QuorumWanted& wanted,
                                                 const QuorumPresence& presence);

}  // namespace dugong
