// The driver's sync-acknowledgement watch (driver/core.h): on a running primary, the sync's
// walsender is sampled every syncSampleMs, and the state machine is told when the sync
// stops or starts again acknowledging commits (driver/sync_ack_watch.h decides). The
// state machine replaces a stalled sync (statemachine/peer_primary.cc). The stream watch
// publishes whether this peer's postgres streams, for the choice of a new sync.
#include "driver/core.h"

namespace dugong::driver {

void Core::startSyncWatch() {
  if (opts_.syncReplaceAfterMs <= 0) return;
  setTimer(TimerKind::kSyncWatch, opts_.syncSampleMs);
}

std::optional<std::pair<int64_t, std::string>> Core::watchedSync() const {
  // Only a primary that runs as one, with writes not stopped for a lost coordinator and
  // no transition in flight (a fence or a reconfiguration changes what commits wait for).
  if (peer_->role() != Role::kPrimary || pg_.roleApplied != Role::kPrimary || isolation_.writesStopped() || pgBusy() ||
      health_.withdrawn()) {
    return std::nullopt;
  }
  const auto& state = peer_->clusterState();
  if (!state || !state->sync || state->oneNodeWriteMode) return std::nullopt;
  return std::make_pair(state->generation, state->sync->id);
}

void Core::syncWatchTick() {
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
