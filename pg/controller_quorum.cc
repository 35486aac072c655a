// Quorum commit on the primary (docs/decisions/0079-quorum-commit.md sections 3 and 5.2).
#include "pg/controller.h"

#include <thread>

#include "pg/controller_support.h"
#include "pg/plan/catch_up.h"

#include <spdlog/spdlog.h>

namespace dugong::pg {
using namespace std::chrono_literals;

namespace {
// "0/5000110,0/5000200" (string_agg of flush_lsn), or "": the positions.
std::optional<std::vector<uint64_t>> parseFlushList(const std::string& list) {
  std::vector<uint64_t> out;
  for (size_t at = 0; !list.empty() && at != std::string::npos;) {
    const size_t comma = list.find(',', at);
    auto flush = WalPosition::parse(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (!flush) return std::nullopt;
    out.push_back(flush->value());
    at = comma == std::string::npos ? comma : comma + 1;
  }
  return out;
}

// "'a', 'b'": the members' names for IN (...).
std::string memberLiterals(const StandbyQuorum& quorum) {
  std::string names;
  for (const auto& m : quorum.members) names += (names.empty() ? "" : ", ") + quoteLiteral(m);
  return names;
}
}  // namespace

Result<bool> PgController::reloadQuorum(const StandbyQuorum& quorum) {
  // Serialized with apply(), fence() and pollWritable(), as a fence is.
  std::lock_guard applyLock(applyMu_);
  auto r = reloadQuorumLocked(quorum, std::chrono::steady_clock::now() +
                                          std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s));
  if (!r) return Error{r.error()};
  return true;
}

Result<PgInstance> PgController::reloadQuorumLocked(const StandbyQuorum& quorum,
                                                    std::chrono::steady_clock::time_point deadline) {
  if (auto valid = validQuorum(quorum); !valid) return Error{"quorum: " + valid.error()};
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  if (want.role != "primary" || !isRunning()) return Error{"quorum: postgres does not run as a primary"};
  want.quorum = quorum;
  FenceTarget target;
  target.quorum = quorum;
  auto w = writeConf(want, FloorRead::kKeep);
  if (w) w = reload();
  if (!w) return Error{"quorum: " + w.error()};
  {
    // A primary still read-only becomes writable under the rule it now runs.
    std::lock_guard lock(stateMu_);
    if (pending_ && pending_->quorum) pending_->quorum = quorum;
  }
  std::string last;
  do {
    auto v = verifyFence(target);
    if (v) {
      spdlog::info("pg: {}", describeFence(target));
      return v.value();
    }
    last = v.error();
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return Error{"quorum: " + renderQuorum(quorum) + " did not take effect: " + last};
}

Result<QuorumFenceSeen> PgController::lookAtQuorumFence(const StandbyQuorum& quorum, const std::string& verifiedAt,
                                                        bool newWalsendersOnly) const {
  const std::string names = memberLiterals(quorum);
  const std::string at = quoteLiteral(verifiedAt) + "::timestamptz";
  // In this order (pg/plan/fence.h): the stale walsenders, the flushes, then p0.
  auto q = localQuery("SELECT (SELECT count(*) FROM pg_stat_replication WHERE application_name IN (" + names +
                      ") AND backend_start <= " + at + "), "
                      "(SELECT coalesce(string_agg(flush_lsn::text, ','), '') FROM pg_stat_replication "
                      "WHERE state = 'streaming' AND sync_state = 'quorum' AND flush_lsn IS NOT NULL AND "
                      "application_name IN (" + names + ")" +
                      (newWalsendersOnly ? " AND backend_start > " + at : std::string()) +
                      "), pg_current_wal_flush_lsn()::text");
  if (!q) return Error{q.error()};
  if (q->rows.size() != 1 || !q->rows[0][0] || !q->rows[0][1] || !q->rows[0][2]) {
    return Error{"pg_stat_replication gave no row"};
  }
  auto flushes = parseFlushList(*q->rows[0][1]);
  auto primary = WalPosition::parse(*q->rows[0][2]);
  if (!flushes || !primary) return Error{"unreadable positions: " + *q->rows[0][1] + " / " + *q->rows[0][2]};
  return QuorumFenceSeen{std::stol(*q->rows[0][0]), *flushes, primary->value()};
}

PgFenced PgController::fenceQuorum(const StandbyQuorum& to, bool endWalsenders, std::chrono::milliseconds timeout) {
  // Serialized with apply(), fence() and pollWritable(), as a fence is.
  std::lock_guard applyLock(applyMu_);
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  auto fail = [&to](const std::string& why) { return PgFenced{false, "quorum: " + renderQuorum(to) + ": " + why, 0}; };
  std::optional<StandbyQuorum> from;
  {
    std::lock_guard lock(stateMu_);
    from = state_.quorum;
    if (!from && state_.syncId) from = StandbyQuorum{1, {*state_.syncId}};
  }
  auto planned = planQuorumFence(from, to);
  if (!planned) return fail(planned.error());
  QuorumFence fence = planned.value();
  fence.endWalsenders = fence.endWalsenders || endWalsenders;
  // Step 1: the reload, verified; then the time after which a walsender started has it.
  auto reloaded = reloadQuorumLocked(to, deadline);
  if (!reloaded) return fail(reloaded.error());
  auto clock = localQuery("SELECT clock_timestamp()::text");
  if (!clock || clock->rows.size() != 1 || !clock->rows[0][0]) return fail("cannot read the time");
  const std::string verifiedAt = *clock->rows[0][0];
  // Steps 2-4, one look at a time.
  QuorumFenceProgress progress;
  std::string last = "no look yet";
  for (;;) {
    const bool gaveUp = std::chrono::steady_clock::now() >= deadline;
    auto seen = lookAtQuorumFence(to, verifiedAt, fence.endWalsenders);
    if (!seen) {
      last = seen.error();
      if (gaveUp) return fail("gave up after " + std::to_string(msSince(started)) + " ms: " + last);
      std::this_thread::sleep_for(20ms);
      continue;
    }
    const QuorumFenceNext next = planQuorumFenceStep(fence, progress, *seen, gaveUp);
    switch (next.step) {
      case QuorumFenceStep::kEndWalsenders: {
        auto ended = localQuery("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication "
                                "WHERE application_name IN (" + memberLiterals(to) + ")");
        if (ended) {
          progress = next.progress;
          spdlog::info("pg: {}: k raised, ended {} walsender(s) of its members", renderQuorum(to),
                       ended->rows.at(0)[0].value_or("?"));
        } else {
          last = ended.error();
        }
        continue;
      }
      case QuorumFenceStep::kWaitForWalsenders:
        progress = next.progress;
        last = std::to_string(seen->staleWalsenders) + " member(s) stream through a walsender older than the reload";
        break;
      case QuorumFenceStep::kWaitForCatchUp: {
        progress = next.progress;
        auto kth = kthLatestFlush(seen->memberFlushes, to.k);
        last = "the " + std::to_string(to.k) + "-th latest flush of its members streaming synchronously (" +
               std::to_string(seen->memberFlushes.size()) + ") is " + (kth ? WalPosition(*kth).toString() : "none") +
               ", short of " + WalPosition(progress.p0.value_or(0)).toString();
        break;
      }
      case QuorumFenceStep::kCaughtUp:
        spdlog::info("pg: fenced for the step: {} holds and its members have flushed {} ({} ms)", renderQuorum(to),
                     WalPosition(next.progress.p0.value_or(0)).toString(), msSince(started));
        return PgFenced{true, "", reloaded.value()};
      case QuorumFenceStep::kGaveUp:
        return fail("gave up after " + std::to_string(msSince(started)) + " ms: " + last);
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::optional<StandbyQuorum> PgController::standbyQuorum(const std::optional<Quorum>& quorum) {
  if (!quorum) return std::nullopt;
  StandbyQuorum q{quorum->k, {}};
  for (const auto& m : quorum->members) q.members.push_back(m.id);
  return q;
}

bool PgController::quorumCaughtUp(const Pending& pending, std::string* flushed) {
  const StandbyQuorum& quorum = *pending.quorum;
  const std::string names = memberLiterals(quorum);
  // The primary's position first, then the members that stream synchronously.
  auto q = localQuery("SELECT pg_current_wal_lsn()::text, (SELECT coalesce(string_agg(flush_lsn::text, ','), '') "
                      "FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'quorum' AND "
                      "flush_lsn IS NOT NULL AND application_name IN (" + names + "))");
  if (!q || q->rows.size() != 1 || !q->rows[0][0] || !q->rows[0][1]) return false;
  auto current = WalPosition::parse(*q->rows[0][0]);
  if (!current) return false;
  QuorumSeen seen{current->value(), quorum.k, {}};
  const std::string list = *q->rows[0][1];
  auto flushes = parseFlushList(list);
  if (!flushes) return false;
  seen.memberFlushes = *flushes;
  const CatchUp step = planCatchUp(pending.targetLsn, seen);
  if (step.targetSet) {
    std::lock_guard lock(stateMu_);
    if (pending_) pending_->targetLsn = step.target;
    spdlog::info("pg: {} stream synchronously; waiting for the k-th latest flush to reach {}", renderQuorum(quorum),
                 current->toString());
  }
  if (!step.writable) {
    if (std::chrono::steady_clock::now() - pending.reported >= 10s) {
      {
        std::lock_guard lock(stateMu_);
        if (pending_) pending_->reported = std::chrono::steady_clock::now();
      }
      spdlog::warn("pg: still read-only, waiting for {} members of {} to catch up; streaming synchronously: {}",
                   quorum.k, renderQuorum(quorum), list.empty() ? "none" : list);
    }
    return false;
  }
  auto kth = kthLatestFlush(seen.memberFlushes, quorum.k);
  *flushed = kth ? WalPosition(*kth).toString() : "?";
  return true;
}

Result<QuorumMembersView> PgController::quorumMembers(const std::vector<std::string>& memberNames) const {
  auto r = localQuery(quorumMembersQuery(memberNames));
  if (!r) return Error{r.error()};
  return parseQuorumMembersView(memberNames, *r);
}

}  // namespace dugong::pg
