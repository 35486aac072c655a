// Quorum commit on the primary (docs/decisions/0079-quorum-commit.md sections 3 and 5.2).
#include "pg/controller.h"

#include <thread>

#include "pg/plan/catch_up.h"

#include <spdlog/spdlog.h>

namespace dugong::pg {
using namespace std::chrono_literals;

Result<bool> PgController::reloadQuorum(const StandbyQuorum& quorum) {
  // Serialized with apply(), fence() and pollWritable(), as a fence is.
  std::lock_guard applyLock(applyMu_);
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
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto v = verifyFence(target);
    if (v) {
      spdlog::info("pg: {}", describeFence(target));
      return true;
    }
    last = v.error();
    std::this_thread::sleep_for(20ms);
  }
  return Error{"quorum: " + renderQuorum(quorum) + " did not take effect: " + last};
}

std::optional<StandbyQuorum> PgController::standbyQuorum(const std::optional<Quorum>& quorum) {
  if (!quorum) return std::nullopt;
  StandbyQuorum q{quorum->k, {}};
  for (const auto& m : quorum->members) q.members.push_back(m.id);
  return q;
}

bool PgController::quorumCaughtUp(const Pending& pending, std::string* flushed) {
  const StandbyQuorum& quorum = *pending.quorum;
  std::string names;
  for (const auto& m : quorum.members) names += (names.empty() ? "" : ", ") + quoteLiteral(m);
  // The primary's position first, then the members that stream synchronously.
  auto q = localQuery("SELECT pg_current_wal_lsn()::text, (SELECT coalesce(string_agg(flush_lsn::text, ','), '') "
                      "FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'quorum' AND "
                      "flush_lsn IS NOT NULL AND application_name IN (" + names + "))");
  if (!q || q->rows.size() != 1 || !q->rows[0][0] || !q->rows[0][1]) return false;
  auto current = WalPosition::parse(*q->rows[0][0]);
  if (!current) return false;
  QuorumSeen seen{current->value(), quorum.k, {}};
  std::string list = *q->rows[0][1];
  for (size_t at = 0; !list.empty() && at != std::string::npos;) {
    const size_t comma = list.find(',', at);
    auto flush = WalPosition::parse(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (!flush) return false;
    seen.memberFlushes.push_back(flush->value());
    at = comma == std::string::npos ? comma : comma + 1;
  }
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
