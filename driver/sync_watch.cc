// The driver's sync-acknowledgement watch (driver/core.h): on a running primary, the sync's
// walsender is sampled every syncSampleMs, and the state machine is told when the sync
// stops or starts again acknowledging commits (driver/sync_ack_watch.h decides). The
// state machine replaces a stalled sync (statemachine/peer_primary.cc). The stream watch
// publishes whether this peer's postgres streams, for the choice of a new sync.
#include <algorithm>

#include "driver/core.h"

namespace dugong::driver {

void Core::startSyncWatch() {
  if (opts_.syncReplaceAfterMs <= 0) return;
  setTimer(TimerKind::kSyncWatch, opts_.syncSampleMs);
}

bool Core::watchesReplication() const {
  // Only a primary that runs as one, with writes not stopped for a lost coordinator and
  // no transition in flight (a fence or a reconfiguration changes what commits wait for).
  return peer_->role() == Role::kPrimary && pg_.roleApplied == Role::kPrimary && !isolation_.writesStopped() &&
         !pgBusy() && !health_.withdrawn();
}

std::optional<std::pair<int64_t, std::string>> Core::watchedSync() const {
  if (!watchesReplication()) return std::nullopt;
  const auto& state = peer_->clusterState();
  if (!state || !state->sync || state->oneNodeWriteMode) return std::nullopt;
  return std::make_pair(state->generation, state->sync->id);
}

std::optional<std::pair<int64_t, std::vector<std::string>>> Core::watchedMembers() const {
  if (!watchesReplication()) return std::nullopt;
  const auto& state = peer_->clusterState();
  if (!state || !state->quorum) return std::nullopt;
  std::vector<std::string> ids;
  for (const auto& m : state->quorum->members) ids.push_back(m.id);
  return std::make_pair(state->generation, std::move(ids));
}

void Core::syncWatchTick() {
  if (const auto members = watchedMembers()) {
    syncWatch_.watchedFor_.reset();
    return membersWatchTick(*members);
  }
  syncWatch_.membersFor_.reset();
  syncWatch_.members_.clear();
  const auto watched = watchedSync();
  if (!watched) {
    syncWatch_.watchedFor_.reset();
    return startSyncWatch();
  }
  if (syncWatch_.watchedFor_ != watched) {
    syncWatch_.watchedFor_ = watched;
    syncWatch_.ack_.reset(watched->second, now());
  }
  if (syncWatch_.sampleInFlight_) return startSyncWatch();
  syncWatch_.sampleInFlight_ = true;
  emit(cmd::SampleSync{watched->first, watched->second});
}

void Core::onSyncSampled(const in::SyncSampled& s) {
  syncWatch_.sampleInFlight_ = false;
  const auto watched = std::make_optional(std::make_pair(s.generation, s.sync));
  // Answered for another sync, generation or role than now: no news of this one.
  if (!s.r || watchedSync() != watched || syncWatch_.watchedFor_ != watched) return startSyncWatch();
  auto news = syncWatch_.ack_.observe(now(), *s.r);
  startSyncWatch();
  if (!news) return;
  if (!news->acknowledging) ++counters_.syncStalls;
  step(*news);  // the state machine logs the news and its decision
}

// Quorum mode: one sample of every member, one watch per member. A member added keeps
// nothing of an earlier time in the set; one removed is forgotten; a new generation
// starts every watch afresh (its members' connection grace from now).
void Core::membersWatchTick(const std::pair<int64_t, std::vector<std::string>>& members) {
  if (syncWatch_.membersFor_ != members) {
    if (!syncWatch_.membersFor_ || syncWatch_.membersFor_->first != members.first) syncWatch_.members_.clear();
    std::erase_if(syncWatch_.members_, [&](const auto& w) {
      return std::find(members.second.begin(), members.second.end(), w.first) == members.second.end();
    });
    for (const std::string& id : members.second) {
      auto [it, added] = syncWatch_.members_.try_emplace(id, syncWatch_.replaceAfterMs_, syncWatch_.connectGraceMs_);
      if (added) it->second.reset(id, now());
    }
    syncWatch_.membersFor_ = members;
  }
  if (syncWatch_.sampleInFlight_) return startSyncWatch();
  syncWatch_.sampleInFlight_ = true;
  emit(cmd::SampleMembers{members.first, members.second});
}

void Core::onMembersSampled(const in::MembersSampled& s) {
  syncWatch_.sampleInFlight_ = false;
  const auto watched = std::make_optional(std::make_pair(s.generation, s.members));
  // Answered for other members, generation or role than now: no news of these.
  if (!s.r || watchedMembers() != watched || syncWatch_.membersFor_ != watched) return startSyncWatch();
  std::vector<SyncAcknowledgement> news;
  for (auto& [id, watch] : syncWatch_.members_) {
    const auto seen = s.r->members.find(id);
    SyncReplicationSample sample = seen == s.r->members.end() ? SyncReplicationSample{} : seen->second;
    sample.primaryFlushed = s.r->primaryFlushed;
    if (auto n = watch.observe(now(), sample)) news.push_back(std::move(*n));
  }
  startSyncWatch();
  for (const SyncAcknowledgement& n : news) {
    if (!n.acknowledging) ++counters_.syncStalls;
    step(n);  // the state machine logs the news and its decision
  }
}

void Core::streamWatchTick() {
  const std::optional<StreamSample>& sample = now_.stream;
  if (!sample) return;  // not told: nothing published, the peers count this one as streaming
  setTimer(TimerKind::kStreamWatch, opts_.healthTickMs);
  const std::string upstream = pg_.lastApplied && pg_.lastApplied->upstream ? pg_.lastApplied->upstream->id : "";
  if (!sample->running || upstream.empty()) {
    syncWatch_.streamedFrom_.clear();
  } else if (sample->streamingFrom == upstream) {
    syncWatch_.streamedFrom_ = upstream;
  }
  const bool streams = !upstream.empty() && syncWatch_.streamedFrom_ == upstream;
  // A takeover report may stand in the election node: publishing would change the node's
  // version, which this member's own takeover write checks (driver/reports.h). Published
  // once the report is withdrawn.
  if (reports_.mayStand()) return;
  if (syncWatch_.publishedStreaming_ == streams) return;
  syncWatch_.publishedStreaming_ = streams;
  if (streams) {
    log(LogLevel::kInfo, "publishing that postgres streams: its WAL receiver streams from " + upstream);
  } else {
    log(LogLevel::kInfo, std::string("publishing that postgres does not stream: ") +
                             (upstream.empty()       ? "it runs as no standby"
                              : !sample->running     ? "it does not run"
                                                     : "it has not streamed from " + upstream + " since it started") +
                             "; a takeover prefers another async as the new sync");
  }
  emit(cmd::PublishStreaming{streams});
}

}  // namespace dugong::driver
