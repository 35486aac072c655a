// Quorum mode's rules in the peer (docs/decisions/0079-quorum-commit.md; PeerOptions::quorum):
// a member's takeover (4.1-4.5: fence, read, report, decide, write with checks, or wait
// for the taker), and the primary's membership steps (5.1-5.3), each run by the pure
// rules of quorum.h. Sync mode never comes here: a sync-mode state is Manatee's.
#include <map>
#include <utility>

#include "statemachine/peer.h"
#include "statemachine/promote_request.h"
#include "statemachine/quorum.h"
#include "statemachine/time_format.h"

namespace dugong {

QuorumPresence Peer::quorumPresence() const {
  QuorumPresence p;
  p.present = *active_;
  for (const auto& peer : *active_) {
    if (streams(peer)) p.streaming.insert(peer.id);
  }
  for (const auto& [id, detail] : quorum_.stalled) p.stalled.insert(id);
  // A peer held back after its removal is no candidate (it counts as acknowledging
  // nothing); only a peer that is not a member, so no rule removes one for it.
  for (const auto& [id, held] : quorum_.heldBack) {
    if (now_ < held.until() && !(state_ && state_->quorum && containsPeer(state_->quorum->members, id))) {
      p.stalled.insert(id);
    }
  }
  return p;
}

// What the cluster configuration wants; without it, what the state has: the primary
// repairs the set (a gone member replaced) and changes nothing else.
QuorumWanted Peer::quorumWanted() const {
  if (quorum_.wanted) return {quorum_.wanted->k, quorum_.wanted->size, quorum_.wanted->mode};
  const ClusterState& s = *state_;
  if (!s.quorum) return {1, 1, ReplicationMode::kSync};
  return {s.quorum->k, static_cast<int>(s.quorum->members.size()), ReplicationMode::kQuorum};
}

// A member of a format-2 state (role sync). When the primary is gone, or a promote
// request names a member, it fences itself, reads its WAL under the fence and publishes
// that report (4.2); once enough members have reported, every member computes the same
// decision (4.3) and only the taker writes, checking every report it counted (4.4).
void Peer::evaluateMember() {
  const ClusterState& s = *state_;
  std::optional<std::string> target;
  if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, now_);
    if (!req) {
      blocked("ignoring promote request: " + req.error(), false);
    } else if (req->role == "sync") {
      target = req->id;
    }
  }
  const MemberTakeoverStart start = memberTakeoverStart(s, opts_.self.id, quorumPresence(), target, pgReady());
  if (!start.why) {
    // No takeover: a report that stands is withdrawn, then the fence lifted (evaluate()).
    quorum_.waiting.clear();
    if (start.blocked) blocked(*start.blocked, true);
    return;
  }
  const std::string& why = *start.why;
  keepFence_ = true;
  if (quorum_.publishing) return;  // evaluated again once published
  // 1. Fence, 2. read under the fence, 3. publish: a report stands for a member that
  // acknowledges nothing more, read from the run of postgres that was fenced.
  const bool standing = quorum_.mine && quorum_.mine->generation == s.generation && quorum_.mine->nodeVersion >= 0 &&
                        fence_ == Fence::kFenced && fencedFor_.empty() && quorum_.mine->instance == fencedInstance_;
  if (!standing) {
    auto wal = fencedWal(why, std::nullopt);
    if (!wal) return;
    if (!freshHistory_) {
      return blocked(why + ", but the timelines of this member's WAL are not known: it reports only with them", true);
    }
    if (holdUpdates_) return blocked(why + ": waiting to retry publishing this member's report", false);
    return publishReport(TakeoverReport{s.generation, *wal, *freshHistory_, -1, fencedInstance_}, why);
  }

  TakeoverReports reports = quorum_.seen;
  reports[opts_.self.id] = *quorum_.mine;  // as published: the session's news may lag
  const QuorumDecision d = decideQuorumTakeover(s, reports, quorumPresence(), quorumWanted(), target);
  if (!d.takeover) {
    quorum_.waiting = d.reason;
    return blocked(why + "; no takeover: " + d.reason, false);
  }
  if (!isSelf(d.takeover->taker)) {
    quorum_.waiting = d.takeover->taker.id + " takes over; this member keeps its fence until the state names it: " +
                      d.reason;
    return blocked(why + "; waiting for " + d.takeover->taker.id + " to write: " + d.reason, false);
  }
  quorum_.waiting.clear();
  std::vector<ElectionNodeCheck> checks;
  for (const auto& [id, version] : d.takeover->checks) checks.push_back({id, version});
  historyCheck_ = 0;  // decision 0072's check is the quorum primary's to come (0079 4.7)
  writeState(d.takeover->next, why + "; " + d.reason, std::move(checks));
}

void Peer::publishReport(std::optional<TakeoverReport> report, const std::string& why) {
  quorum_.publishing = true;
  quorum_.publishingWhat = report;
  log(LogLevel::kInfo, report ? "publishing this member's takeover report (" + report->describe() + "): " + why
                              : "withdrawing this member's takeover report: " + why);
  out_->push_back(PublishReport{std::move(report)});
}

void Peer::onReportPublished(const ReportPublished& e) {
  if (!quorum_.publishing) return;
  quorum_.publishing = false;
  std::optional<TakeoverReport> what = std::move(quorum_.publishingWhat);
  quorum_.publishingWhat.reset();
  if (e.ok) {
    quorum_.mine = std::move(what);
    if (quorum_.mine) {
      quorum_.mine->nodeVersion = e.nodeVersion;
    } else {
      log(LogLevel::kInfo, "this member's takeover report is withdrawn");
    }
  } else {
    // The node may hold either: a report stands (not counted by this member until
    // published again), and so does the fence.
    if (what) quorum_.mine = std::move(what);
    if (quorum_.mine) quorum_.mine->nodeVersion = -1;
    holdUpdates_ = true;
    log(LogLevel::kWarn, "publishing this member's takeover report failed: " + e.error + "; retrying in " +
                             std::to_string(opts_.retryDelayMs) + " ms");
    retryLater();
  }
  evaluate();
}

bool Peer::reportHoldsFence() {
  if (!quorum_.mine && !quorum_.publishing) return false;
  if (!quorum_.publishing && !holdUpdates_) {
    publishReport(std::nullopt, role_ == Role::kPrimary ? "this peer is the primary of generation " +
                                                              std::to_string(state_->generation)
                                                        : "no takeover stands for it");
  }
  // A taker's write landed, having checked its report: no other can, and it promotes.
  return role_ != Role::kPrimary;
}

// The primary of a format-2 state: promote requests, its membership steps (one at a
// time, in the order of 5.1), and the async chain behind the first member.
void Peer::evaluateQuorumPrimary() {
  const ClusterState& s = *state_;
  // A verdict about a peer that is no longer a member is stale (a member added again
  // starts with none).
  std::erase_if(quorum_.stalled, [&s](const auto& e) { return !containsPeer(s.quorum->members, e.first); });
  // A hold is forgotten once it could no longer double (holdBack); one still running for a
  // present peer that is not a member brings the next look at its end.
  std::erase_if(quorum_.heldBack, [this](const auto& e) { return now_ >= e.second.until() + e.second.holdMs; });
  for (const auto& [id, held] : quorum_.heldBack) {
    if (now_ < held.until() && containsPeer(*active_, id) && !containsPeer(s.quorum->members, id)) {
      startTimer(TimerId::kRetryEvaluation, held.until() - now_);
    }
  }
  if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, now_);
    if (!req) return removePromote("removed an invalid promote request: " + req.error());
    if (req->role == "async") {
      return blocked("promote request for async " + req->id + ": in quorum mode an async becomes a member by a "
                     "membership step first, which this primary does not take for a request; it expires",
                     false);
    }
    return;  // a member's promotion is the members' to carry out
  }
  if (auto step = nextMembershipStep(s, quorumWanted(), quorumPresence())) return runMembershipStep(*step);
  quorum_.step.reset();
  asyncChain(s.quorum->members);
}

// A step that makes postgres acknowledge more easily is written, and reloaded once the
// write has landed (evaluate() applies the state's rule); one that makes it acknowledge
// less easily is reloaded, fenced and caught up first, and written after.
void Peer::runMembershipStep(const MembershipStep& step) {
  // One step at a time: the next waits until postgres runs the state's rule.
  if (!pgReady()) return blocked(step.reason + ": waiting for postgres to run the state's configuration first", false);
  quorum_.step = step;
  if (step.order == StepOrder::kReloadFenceThenWrite) {
    if (!quorumFenced(step)) return;
    const bool stalled = step.kind == MembershipStep::Kind::kRemove && quorum_.stalled.count(step.member) > 0;
    return writeState(step.next, step.reason + "; fenced: " + quorumRule(*step.next.quorum) + " holds" +
                                     (stalled ? "; " + holdBack(step.member) : ""));
  }
  writeState(step.next, step.reason);
}

std::string Peer::holdBack(const std::string& id) {
  StallHold& held = quorum_.heldBack[id];
  const bool soonAgain = held.renew(now_, opts_.syncReplaceHoldMs);
  return id + " is not added back as a member before " + formatIso8601(held.until()) + " (held back " +
         std::to_string(held.holdMs) + " ms" + (soonAgain ? ", doubled: it was removed again soon after its last hold" : "") +
         ")";
}

bool Peer::quorumFenced(const MembershipStep& step) {
  const std::string target = "quorum " + quorumRule(*step.next.quorum);
  if (fence_ == Fence::kFenced && fencedFor_ == target) {
    keepFence_ = true;
    return true;
  }
  // A fence that failed (a member of the new rule did not catch up): the state's rule is
  // applied again (keepFence_ false), and the step planned again after the retry.
  if (holdUpdates_ || pgApplying_ || timers_.count(TimerId::kRetryPgApply)) return false;
  keepFence_ = true;
  update_ = Update::kFencing;
  updateReason_ = step.reason;
  fencedFor_ = target;
  log(LogLevel::kInfo, "fencing postgres before writing the step (" + step.reason + "): reloading " +
                           quorumRule(*step.next.quorum) + (step.endWalsenders ? ", ending the members' walsenders" : "") +
                           ", then waiting for its members to catch up");
  out_->push_back(FencePg{std::nullopt, step.next.quorum, step.endWalsenders});
  return false;
}

nlohmann::json Peer::inspectQuorum() const {
  nlohmann::json q = {{"mode", "sync"}, {"waiting", quorum_.waiting}};
  if (state_ && state_->quorum) {
    const Quorum& c = *state_->quorum;
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : c.members) members.push_back(m.id);
    const int n = static_cast<int>(c.members.size());
    q = {{"mode", "quorum"}, {"k", c.k}, {"members", members}, {"readQuorum", readQuorum(n, c.k)},
         {"waiting", quorum_.waiting}};
  }
  nlohmann::json reports = nlohmann::json::object();
  for (const auto& [id, r] : quorum_.seen) {
    reports[id] = r.toJson();
    reports[id]["nodeVersion"] = r.nodeVersion;
  }
  q["reports"] = reports;
  q["mine"] = quorum_.mine ? quorum_.mine->toJson() : nlohmann::json(nullptr);
  q["step"] = quorum_.step ? nlohmann::json(quorum_.step->reason) : nlohmann::json(nullptr);
  if (!quorum_.stalled.empty()) q["acknowledgeNothing"] = quorum_.stalled;
  for (const auto& [id, held] : quorum_.heldBack) {
    q["heldBack"][id] = {{"until", formatIso8601(held.until())}, {"holdMs", held.holdMs}};
  }
  return q;
}

}  // namespace dugong
