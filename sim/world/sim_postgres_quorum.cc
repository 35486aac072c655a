// The quorum member's side of the simulated postgres (docs/decisions/0079 section 7): a
// membership step's fence (PgController::fenceQuorum, with pg/plan's planners) and the
// primary's sample of its members (sampleQuorumMembers).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "pg/plan/fence.h"
#include "sim/world/sim_postgres.h"

namespace dugong::simworld {

struct SimPostgres::QuorumFenceRun {
  pg::QuorumFence fence;
  pg::QuorumFenceProgress progress;
  int64_t started = 0;
  int64_t deadline = 0;
  int64_t verifiedAt = 0;
  uint64_t epoch = 0;
  std::string last = "no look yet";
  std::function<void(PgFenced)> done;
};

void SimPostgres::fenceQuorum(const Quorum& quorum, bool endWalsenders, int64_t timeoutMs,
                              std::function<void(PgFenced)> done) {
  beginTransition("quorum fence");
  const pg::StandbyQuorum to = standbyQuorum(quorum);
  fleet_.trace().trace('A', [&] {
    return id() + " -> fence quorum " + pg::renderQuorum(to) + (endWalsenders ? " ending walsenders" : "") + " within " +
           std::to_string(timeoutMs) + " ms";
  });
  auto run = std::make_shared<QuorumFenceRun>();
  run->started = now();
  run->deadline = now() + timeoutMs;
  run->done = std::move(done);
  PgServer& p = pg();
  std::optional<pg::StandbyQuorum> from = p.quorum;
  if (!from && p.config.downstream) from = pg::StandbyQuorum{1, {p.config.downstream->id}};
  auto planned = pg::planQuorumFence(from, to);
  if (!planned) {
    return fleet_.queue().after(0, guarded([this, run, error = planned.error()] {
      endQuorumFence(run, PgFenced{false, "quorum: " + error, 0});
    }));
  }
  run->fence = planned.value();
  run->fence.endWalsenders = run->fence.endWalsenders || endWalsenders;
  // Step 1: the configuration written and reloaded under the apply lock.
  const PgModel& m = fleet_.model();
  const int64_t end = std::max(now(), p.applyLockedUntil) +
                      (now() < p.slowUntil ? m.slowReload.draw(fleet_.rng()) : m.fence.draw(fleet_.rng()));
  p.applyLockedUntil = end;
  fleet_.queue().at(end, guarded([this, run] {
    PgServer& pg = this->pg();
    if (pg.transitioning || !pg.serving() || pg.config.role != PgRole::kPrimary) {
      return endQuorumFence(run, PgFenced{false, "quorum: postgres does not run as a primary", 0});
    }
    run->epoch = pg.epoch;
    fleet_.reloadQuorum(host_, *run->fence.target.quorum);
    verifyQuorumReload(run);
  }));
}

// checkFence on what postgres shows (pg/plan/fence.h), looked at every 20 ms until it
// holds or the deadline passes (PgController::reloadQuorumLocked).
void SimPostgres::verifyQuorumReload(std::shared_ptr<QuorumFenceRun> run) {
  PgServer& pg = this->pg();
  if (pg.epoch != run->epoch || !pg.serving() || pg.config.role != PgRole::kPrimary) {
    return endQuorumFence(run, PgFenced{false, "quorum: postgres does not run as a primary", 0});
  }
  fleet_.refreshWalsenders(host_);
  const pg::StandbyQuorum& to = *run->fence.target.quorum;
  pg::FenceSeen seen;
  seen.syncNames = pg::renderQuorum(*pg.quorum);
  for (const auto& [standby, w] : pg.walsenders) {
    const bool member = std::find(to.members.begin(), to.members.end(), standby) != to.members.end();
    const bool priority = PgFleet::prioritized(pg, standby);
    if (!member && priority) ++seen.othersWithPriority;
    if (member && !priority) ++seen.syncWithoutPriority;
  }
  auto checked = pg::checkFence(run->fence.target, seen);
  if (checked) {
    run->verifiedAt = now();  // the clock_timestamp() read after the verifying query
    return lookAtQuorumFence(run);
  }
  if (now() >= run->deadline) {
    return endQuorumFence(run, PgFenced{false, "quorum: " + seen.syncNames + " did not take effect: " + checked.error(), 0});
  }
  const int64_t next = now() + 20;
  pg.applyLockedUntil = std::max(pg.applyLockedUntil, next);
  fleet_.queue().at(next, guarded([this, run] { verifyQuorumReload(run); }));
}

// Steps 2-4, one look (one statement) at a time, every 20 ms (PgController::fenceQuorum).
void SimPostgres::lookAtQuorumFence(std::shared_ptr<QuorumFenceRun> run) {
  PgServer& pg = this->pg();
  if (pg.epoch != run->epoch || !pg.serving() || pg.config.role != PgRole::kPrimary) {
    return endQuorumFence(run, PgFenced{false, "quorum: postgres does not run as a primary", 0});
  }
  const pg::StandbyQuorum& to = *run->fence.target.quorum;
  fleet_.refreshWalsenders(host_);
  pg::QuorumFenceSeen seen;
  for (const std::string& member : to.members) {
    auto it = pg.walsenders.find(member);
    if (it != pg.walsenders.end() && it->second.startedAt <= run->verifiedAt) ++seen.staleWalsenders;
  }
  seen.memberFlushes = fleet_.memberFlushes(host_, to.members,
                                            run->fence.endWalsenders ? std::optional<int64_t>(run->verifiedAt) : std::nullopt);
  seen.primaryFlush = pg.wal.position().value();
  const bool gaveUp = now() >= run->deadline;
  const pg::QuorumFenceNext next = pg::planQuorumFenceStep(run->fence, run->progress, seen, gaveUp);
  switch (next.step) {
    case pg::QuorumFenceStep::kEndWalsenders:
      // pg_terminate_backend of each member's walsender: its standby connects again after
      // wal_retrieve_retry_interval, through a walsender that starts with the file's rule.
      for (const std::string& member : to.members) {
        if (pg.walsenders.erase(member) == 0) continue;
        const int s = fleet_.hostOf(member);
        if (s >= 0) fleet_.server(s).reconnectAt = now() + fleet_.rng().between(50, 250);
      }
      run->progress = next.progress;
      break;
    case pg::QuorumFenceStep::kWaitForWalsenders:
      run->progress = next.progress;
      run->last = std::to_string(seen.staleWalsenders) + " member(s) stream through a walsender older than the reload";
      break;
    case pg::QuorumFenceStep::kWaitForCatchUp:
      run->progress = next.progress;
      run->last = "fewer than " + std::to_string(to.k) + " of its members streaming synchronously have flushed " +
                  WalPosition(run->progress.p0.value_or(0)).toString();
      break;
    case pg::QuorumFenceStep::kCaughtUp:
      fleet_.trace().trace('P', [&] {
        return id() + " fenced for the step: " + pg::renderQuorum(to) + " holds and its members have flushed " +
               WalPosition(next.progress.p0.value_or(0)).toString();
      });
      return endQuorumFence(run, PgFenced{true, "", pg.instance});
    case pg::QuorumFenceStep::kGaveUp:
      return endQuorumFence(run, PgFenced{false, "quorum: " + pg::renderQuorum(to) + ": gave up after " +
                                                     std::to_string(now() - run->started) + " ms: " + run->last,
                                          0});
  }
  const int64_t at = now() + 20 + fleet_.model().syncSample.draw(fleet_.rng());
  pg.applyLockedUntil = std::max(pg.applyLockedUntil, at);
  fleet_.queue().at(at, guarded([this, run] { lookAtQuorumFence(run); }));
}

void SimPostgres::endQuorumFence(const std::shared_ptr<QuorumFenceRun>& run, PgFenced r) {
  --transitions_;
  if (!r.ok) fleet_.trace().trace('P', [&] { return id() + " quorum fence failed: " + r.error; });
  if (r.ok && hooks_.fenced) hooks_.fenced();
  if (r.ok && hooks_.quorumFenced) hooks_.quorumFenced(run->fence.target.quorum->members);
  auto done = std::move(run->done);
  hooks_.deliver(r, [&] { done(r); });
}

void SimPostgres::sampleQuorumMembers(const std::vector<std::string>& memberIds,
                                      std::function<void(Result<driver::QuorumReplicationSample>)> done) {
  PgServer& p = pg();
  int64_t end = std::max(now(), p.queryBusyUntil) + fleet_.model().syncSample.draw(fleet_.rng());
  p.queryBusyUntil = end;
  fleet_.queue().at(end, guarded([this, memberIds, done = std::move(done)] {
    PgServer& pg = this->pg();
    if (!pg.serving() || pg.config.role != PgRole::kPrimary) return done(Error{"postgres is not running as primary"});
    fleet_.refreshWalsenders(host_);
    driver::QuorumReplicationSample s;
    s.primaryFlushed = pg.wal.position();  // read first, as the adapter's one statement does
    for (const std::string& member : memberIds) {
      driver::SyncReplicationSample m;
      const int h = fleet_.hostOf(member);
      m.streaming = h >= 0 && pg.walsenders.count(member) > 0;
      if (m.streaming) m.flushed = fleet_.server(h).wal.position();
      m.waitingCommits = static_cast<int>(pg.waiting.size());
      m.primaryFlushed = s.primaryFlushed;
      s.members.emplace(member, m);
    }
    done(s);
  }));
}

}  // namespace dugong::simworld
