#include "statemachine/quorum.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "statemachine/data_state.h"

namespace dugong {

std::optional<Quorum> quorumOf(const ClusterState& state) {
  if (state.quorum) return state.quorum;
  if (state.sync) return Quorum{1, {*state.sync}};
  return std::nullopt;
}

int readQuorum(int members, int k) { return members - k + 1; }

namespace {

// A report as a data state, for the comparisons a lost state's setup already makes
// (PeerDataState::aheadOf, keeps): the same questions between two WALs of one system.
PeerDataState dataOf(const TakeoverReport& r) {
  return PeerDataState{true, "", r.history.timeline, r.wal, r.history.ancestors};
}

std::string describe(const TakeoverReport& r) { return r.history.describe() + ", WAL " + r.wal.toString(); }

// `h`'s WAL is a prefix of `b`'s history: the same timelines before h's, and up to h's
// end b's WAL is on h's timeline.
bool isPrefixOf(const TakeoverReport& h, const TakeoverReport& b) {
  const auto& theirs = h.history.ancestors;
  const auto& mine = b.history.ancestors;
  if (theirs.size() > mine.size() || !std::equal(theirs.begin(), theirs.end(), mine.begin())) return false;
  return h.wal <= b.wal && (h.wal.value() == 0 || b.history.timelineAt(h.wal) == h.history.timeline);
}

// Where `h`'s WAL ends on `b`'s history (b keeps h): its end when a prefix, else the
// point where b's history left h's timeline (h went on past that fork, WAL b never had).
WalPosition positionOn(const TakeoverReport& h, const TakeoverReport& b) {
  if (isPrefixOf(h, b) || h.wal.value() == 0) return h.wal;
  return b.history.ancestors[h.history.ancestors.size()].end;
}

std::string joined(const std::vector<std::string>& parts, const std::string& none) {
  if (parts.empty()) return none;
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

struct Counted {
  const PeerIdentity* member;  // its identity as present now (tags included)
  const TakeoverReport* report;
};

}  // namespace

QuorumDecision decideQuorumTakeover(const ClusterState& state, const TakeoverReports& reports,
                                    const QuorumPresence& presence, const QuorumWanted& wanted,
                                    const std::optional<std::string>& promoteTarget) {
  QuorumDecision d;
  const std::string gen = "generation " + std::to_string(state.generation);
  const std::optional<Quorum> config = quorumOf(state);
  if (!config) {
    d.reason = gen + " is in one-node-write mode: it has no members to take over";
    return d;
  }
  const int n = static_cast<int>(config->members.size());
  const int k = config->k;
  const int q = readQuorum(n, k);
  auto presentAs = [&presence](const std::string& id) -> const PeerIdentity* {
    const int i = indexOfPeer(presence.present, id);
    return i < 0 ? nullptr : &presence.present[static_cast<size_t>(i)];
  };

  // The counted reports, and why each member not counted is not.
  std::vector<Counted> counted;
  std::vector<std::string> missing;
  std::set<std::string> offHistory;
  for (const PeerIdentity& m : config->members) {
    const PeerIdentity* now = presentAs(m.id);
    auto r = reports.find(m.id);
    if (now == nullptr) {
      missing.push_back(m.id + " is gone");
    } else if (r == reports.end()) {
      missing.push_back(m.id + " has not reported");
    } else if (r->second.generation != state.generation) {
      missing.push_back(m.id + " reported for generation " + std::to_string(r->second.generation));
    } else if (state.initTimeline != 0 && r->second.history.timelineAt(state.initWal) != state.initTimeline) {
      missing.push_back(m.id + " reported timeline " + std::to_string(r->second.history.timelineAt(state.initWal)) +
                        " at initWal, the generation's is " + std::to_string(state.initTimeline));
      offHistory.insert(m.id);
    } else {
      counted.push_back({now, &r->second});
      d.counted.push_back(m.id);
    }
  }
  const int r = static_cast<int>(counted.size());
  if (r < q) {
    d.reason = gen + ": " + std::to_string(q) + " of " + std::to_string(n) +
               " member reports needed on the generation's history; have " + joined(d.counted, "none") + "; " +
               joined(missing, "");
    return d;
  }

  // B: the most advanced counted report, ties by set order; it must keep every other
  // one and reach initWal.
  const Counted* best = &counted.front();
  for (const Counted& c : counted) {
    if (dataOf(*c.report).aheadOf(dataOf(*best->report))) best = &c;
  }
  const TakeoverReport& b = *best->report;
  for (const Counted& c : counted) {
    if (!dataOf(b).keeps(dataOf(*c.report))) {
      d.reason = gen + ": " + best->member->id + "'s WAL (" + describe(b) + ") and " + c.member->id + "'s (" +
                 describe(*c.report) + ") diverged: an operator must choose";
      return d;
    }
  }
  if (b.wal < state.initWal) {
    d.reason = gen + ": " + best->member->id + ", the most advanced member, has not caught up: its WAL " +
               b.wal.toString() + " is behind initWal " + state.initWal.toString();
    return d;
  }

  // L: the j-th highest position on B's history, and at least initWal.
  const int j = k - (n - r);
  std::vector<WalPosition> positions;
  for (const Counted& c : counted) positions.push_back(positionOn(*c.report, b));
  std::sort(positions.begin(), positions.end(), std::greater<>());
  const WalPosition bound = std::max(state.initWal, positions[static_cast<size_t>(j - 1)]);

  // The taker: B; a promote request's target instead; an untagged member if B is tagged.
  auto holdsBound = [&](const Counted& c) { return isPrefixOf(*c.report, b) && c.report->wal >= bound; };
  const Counted* taker = nullptr;
  std::string noTaker;
  if (promoteTarget) {
    auto t = std::find_if(counted.begin(), counted.end(), [&](const Counted& c) { return c.member->id == *promoteTarget; });
    if (t == counted.end()) {
      noTaker = "the promote request's target " + *promoteTarget + " has no counted report";
    } else if (t->member->tags.nofailover) {
      noTaker = "the promote request's target " + *promoteTarget + " is tagged nofailover";
    } else if (!holdsBound(*t)) {
      noTaker = "the promote request's target " + *promoteTarget + " (" + describe(*t->report) + ") does not hold " +
                bound.toString() + " on " + best->member->id + "'s history";
    } else {
      taker = &*t;
    }
  } else if (!best->member->tags.nofailover) {
    taker = best;
  } else {
    for (const Counted& c : counted) {
      if (c.member->tags.nofailover || !holdsBound(c)) continue;
      if (taker == nullptr || dataOf(*c.report).aheadOf(dataOf(*taker->report))) taker = &c;
    }
    if (taker == nullptr) {
      noTaker = best->member->id + ", the most advanced member, is tagged nofailover, and no untagged member holds " +
                bound.toString() + " on its history";
    }
  }
  if (taker == nullptr) {
    d.reason = gen + ": " + noTaker;
    return d;
  }

  // The next set: the present members but the taker (none off the history), then present
  // streaming asyncs that may be members, up to the wanted size; never empty.
  const bool syncMode = !state.quorum;
  const size_t size = syncMode ? 1 : static_cast<size_t>(std::max(1, wanted.size));
  PeerList members;
  PeerList asyncs;
  for (const PeerIdentity& m : config->members) {
    const PeerIdentity* now = presentAs(m.id);
    if (now == nullptr || now->id == taker->member->id || offHistory.count(m.id) > 0) continue;
    members.push_back(*now);
  }
  PeerList presentAsyncs;
  for (const PeerIdentity& a : state.async) {
    if (const PeerIdentity* now = presentAs(a.id)) presentAsyncs.push_back(*now);
  }
  for (const bool streamingOnly : {true, false}) {
    for (const PeerIdentity& a : presentAsyncs) {
      if (members.size() >= size || (!streamingOnly && !members.empty())) break;
      if (a.tags.nofailover || containsPeer(members, a.id)) continue;
      if (streamingOnly && presence.streaming.count(a.id) == 0) continue;
      members.push_back(a);
    }
  }
  if (members.empty()) {
    d.reason = gen + ": " + taker->member->id + " would leave no standby to acknowledge commits (no other member " +
               "present, no async that may be one)";
    return d;
  }
  for (const PeerIdentity& a : presentAsyncs) {
    if (!containsPeer(members, a.id)) asyncs.push_back(a);
  }
  for (const PeerIdentity& m : config->members) {
    if (offHistory.count(m.id) > 0) asyncs.push_back(*presentAs(m.id));  // last: it needs a rebuild
  }

  QuorumTakeover t;
  t.taker = *taker->member;
  t.takerWal = taker->report->wal;
  ClusterState& next = t.next;
  next.generation = state.generation + 1;
  next.primary = *taker->member;
  next.deposed = state.deposed;
  if (!containsPeer(next.deposed, state.primary.id)) next.deposed.push_back(state.primary);
  next.initWal = bound;
  next.initTimeline = taker->report->history.timelineAt(bound);
  next.freeze = state.freeze;
  const int nextK = std::clamp(wanted.k, 1, static_cast<int>(members.size()));
  std::string set = "ANY " + std::to_string(nextK) + " (" + peerIds(members) + ")";
  if (syncMode) {
    next.sync = members.front();
    set = "sync " + members.front().id;
    asyncs.insert(asyncs.begin(), members.begin() + 1, members.end());
  } else {
    next.quorum = Quorum{nextK, members};
  }
  next.async = std::move(asyncs);
  for (const Counted& c : counted) t.checks.emplace_back(c.member->id, c.report->nodeVersion);
  d.reason = "generation " + std::to_string(next.generation) + ": " + t.taker.id + " takes over with WAL " +
             t.takerWal.toString() + " (" + std::to_string(r) + " of " + std::to_string(n) +
             " member reports counted, " + std::to_string(q) + " needed: " + joined(d.counted, "") + "); initWal " +
             bound.toString() + " (the position " + std::to_string(j) + " counted reports reach, at least initWal); " + set + "; " + state.primary.id + " is deposed";
  d.takeover = std::move(t);
  return d;
}

MemberTakeoverStart memberTakeoverStart(const ClusterState& state, const std::string& self,
                                        const QuorumPresence& presence,
                                        const std::optional<std::string>& promoteTarget, bool pgReady) {
  const std::optional<Quorum> config = quorumOf(state);
  if (!config || !containsPeer(config->members, self)) return {};
  std::string why;
  if (!containsPeer(presence.present, state.primary.id)) {
    why = "primary " + state.primary.id + " is gone";
  } else if (promoteTarget && containsPeer(config->members, *promoteTarget)) {
    why = "promote request for member " + *promoteTarget + " (deposing " + state.primary.id + ")";
  } else {
    return {};
  }
  if (state.frozen()) return {std::nullopt, why + ", but the cluster is frozen: no takeover"};
  if (!pgReady) return {std::nullopt, why + ", but postgres is not running as a member"};
  const int i = indexOfPeer(presence.present, self);
  if (i >= 0 && presence.present[static_cast<size_t>(i)].tags.nofailover) {
    why += "; this member is tagged nofailover: it reports, and never takes over";
  }
  return {why, std::nullopt};
}

std::string quorumRule(const Quorum& q) { return "ANY " + std::to_string(q.k) + " (" + peerIds(q.members) + ")"; }

namespace {

MembershipStep step(const ClusterState& state, MembershipStep::Kind kind, const std::string& member, Quorum next,
                    const std::string& why) {
  static const std::map<MembershipStep::Kind, StepOrder> kOrder = {
      {MembershipStep::Kind::kAdd, StepOrder::kWriteThenReload},
      {MembershipStep::Kind::kLowerK, StepOrder::kWriteThenReload},
      {MembershipStep::Kind::kRemove, StepOrder::kReloadFenceThenWrite},
      {MembershipStep::Kind::kRaiseK, StepOrder::kReloadFenceThenWrite},
      {MembershipStep::Kind::kReencode, StepOrder::kWriteOnly},
  };
  MembershipStep out{kind, member, kOrder.at(kind), kind == MembershipStep::Kind::kRaiseK, state, ""};
  const std::string order = out.order == StepOrder::kWriteThenReload ? "written, then reloaded"
                                                                     : "reloaded, fenced, then written";
  out.reason = "quorum: " + why + ": " + quorumRule(*state.quorum) + " -> " + quorumRule(next) + " (" + order + ")";
  out.next.quorum = std::move(next);
  return out;
}

}  // namespace

std::optional<MembershipStep> nextMembershipStep(const ClusterState& state, const QuorumWanted& wanted,
                                                 const QuorumPresence& presence) {
  if (state.oneNodeWriteMode || state.frozen() || state.hasPromote()) return std::nullopt;
  const bool quorumMode = wanted.mode == ReplicationMode::kQuorum;
  if (!state.quorum) {
    if (!quorumMode || !state.sync) return std::nullopt;
    MembershipStep out{MembershipStep::Kind::kReencode, "", StepOrder::kWriteOnly, false, state, ""};
    out.next.quorum = Quorum{1, {*state.sync}};
    out.next.sync.reset();
    out.reason = "quorum: the sync " + state.sync->id + " written as ANY 1 (" + state.sync->id +
                 "), the same rule (written only)";
    return out;
  }
  const Quorum& c = *state.quorum;
  const int n = static_cast<int>(c.members.size());
  const int targetK = quorumMode ? std::max(1, wanted.k) : 1;
  const int targetSize = quorumMode ? std::max(1, wanted.size) : 1;
  auto present = [&presence](const std::string& id) { return containsPeer(presence.present, id); };
  auto acknowledges = [&](const std::string& id) {
    return present(id) && presence.streaming.count(id) > 0 && presence.stalled.count(id) == 0;
  };
  auto streamingBut = [&](const std::string& x) {
    return static_cast<int>(std::count_if(c.members.begin(), c.members.end(), [&](const PeerIdentity& m) {
      return m.id != x && acknowledges(m.id);
    }));
  };
  // A removal's fence ends once k of the others have caught up: they must stream.
  auto canRemove = [&](const std::string& x) { return n - 1 >= c.k && streamingBut(x) >= c.k; };
  auto without = [&](const PeerIdentity& x) {
    Quorum q = c;
    q.members.erase(q.members.begin() + indexOfPeer(q.members, x.id));
    return q;
  };
  auto remove = [&](const PeerIdentity& x, const std::string& why) {
    MembershipStep out = step(state, MembershipStep::Kind::kRemove, x.id, without(x), why);
    if (present(x.id)) out.next.async.push_back(presence.present[static_cast<size_t>(indexOfPeer(presence.present, x.id))]);
    return out;
  };
  const PeerIdentity* candidate = nullptr;  // the first present, streaming async that may be a member
  for (const PeerIdentity& a : state.async) {
    const int i = indexOfPeer(presence.present, a.id);
    if (i < 0 || !acknowledges(a.id) || presence.present[static_cast<size_t>(i)].tags.nofailover) continue;
    candidate = &presence.present[static_cast<size_t>(i)];
    break;
  }
  auto add = [&](const std::string& why) {
    Quorum q = c;
    q.members.push_back(*candidate);
    MembershipStep out = step(state, MembershipStep::Kind::kAdd, candidate->id, std::move(q), why);
    out.next.async.erase(out.next.async.begin() + indexOfPeer(out.next.async, candidate->id));
    return out;
  };
  auto withK = [&](int k) {
    Quorum q = c;
    q.k = k;
    return q;
  };

  // 1. A gone member: removed first (kept, it would raise q for nothing).
  for (const PeerIdentity& m : c.members) {
    if (!present(m.id) && canRemove(m.id)) return remove(m, m.id + " is gone");
  }
  // 2. Writes stalled: fewer than k members stream.
  if (streamingBut("") < c.k) {
    const std::string why = "only " + std::to_string(streamingBut("")) + " of " + std::to_string(n) +
                            " members stream, fewer than k (writes wait)";
    if (candidate != nullptr) return add(why + "; adding " + candidate->id);
    if (c.k > 1) return step(state, MembershipStep::Kind::kLowerK, "", withK(c.k - 1), why + ", and no async to add");
  }
  // 3. A present member that acknowledges nothing.
  for (const PeerIdentity& m : c.members) {
    if (present(m.id) && presence.stalled.count(m.id) > 0 && canRemove(m.id)) {
      return remove(m, m.id + " acknowledges nothing; it goes last in the async chain");
    }
  }
  // 4. The size, then 5. k, towards what is wanted; 6. back to sync mode.
  if (n < targetSize && candidate != nullptr) {
    return add(std::to_string(n) + " members, " + std::to_string(targetSize) + " wanted; adding " + candidate->id);
  }
  if (n > targetSize && canRemove(c.members.back().id)) {
    return remove(c.members.back(), std::to_string(n) + " members, " + std::to_string(targetSize) + " wanted; removing " +
                                        c.members.back().id);
  }
  if (c.k < targetK && c.k + 1 < n && streamingBut("") >= c.k + 1) {  // its fence needs k + 1 to catch up
    return step(state, MembershipStep::Kind::kRaiseK, "", withK(c.k + 1),
                "k " + std::to_string(c.k) + ", " + std::to_string(targetK) + " wanted");
  }
  if (c.k > targetK) {
    return step(state, MembershipStep::Kind::kLowerK, "", withK(c.k - 1),
                "k " + std::to_string(c.k) + ", " + std::to_string(targetK) + " wanted");
  }
  if (!quorumMode && n == 1) {
    MembershipStep out{MembershipStep::Kind::kReencode, "", StepOrder::kWriteOnly, false, state, ""};
    out.next.quorum.reset();
    out.next.sync = c.members.front();
    out.reason = "quorum: sync mode wanted: " + quorumRule(c) + " written as the sync " + c.members.front().id +
                 ", the same rule (written only)";
    return out;
  }
  return std::nullopt;
}

}  // namespace dugong
