// The driver's sync-acknowledgement watch (driver.h): on a running primary, the sync's
// walsender is sampled every syncSampleMs, and the state machine is told when the sync
// stops or starts again acknowledging commits (agent/sync_ack_watch.h decides). The
// state machine replaces a stalled sync (statemachine/peer_primary.cc).
#include "agent/driver.h"

namespace dugong::agent {

void Driver::startSyncWatch() {
  if (opts_.syncReplaceAfterMs <= 0) return;
  syncWatchTimer_->start(opts_.syncSampleMs, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired() && !stopping_) syncWatchTick();
  });
}

std::optional<std::pair<int64_t, std::string>> Driver::watchedSync() const {
  // Only a primary that runs as one, with writes not stopped for a lost coordinator and
  // no transition in flight (a fence or a reconfiguration changes what commits wait for).
  if (peer_->role() != Role::kPrimary || roleApplied_ != Role::kPrimary || writesStopped_ || pgBusy_ || withdrawn_) {
    return std::nullopt;
  }
  const auto& state = peer_->clusterState();
  if (!state || !state->sync || state->oneNodeWriteMode) return std::nullopt;
  return std::make_pair(state->generation, state->sync->id);
}

void Driver::syncWatchTick() {
  const auto watched = watchedSync();
  if (!watched) {
    syncWatchedFor_.reset();
    return startSyncWatch();
  }
  if (syncWatchedFor_ != watched) {
    syncWatchedFor_ = watched;
    syncWatch_.reset(watched->second, env_.clock.monotonicMs());
  }
  if (syncSampleInFlight_) return startSyncWatch();
  syncSampleInFlight_ = true;
  env_.postgres.sampleSyncStandby(
      watched->second, [this, alive = std::weak_ptr<int>(alive_), watched](Result<SyncReplicationSample> sample) {
        if (alive.expired()) return;
        syncSampleInFlight_ = false;
        if (stopping_) return;
        // Answered for another sync, generation or role than now: no news of this one.
        if (!sample || watchedSync() != watched || syncWatchedFor_ != watched) return startSyncWatch();
        auto news = syncWatch_.observe(env_.clock.monotonicMs(), *sample);
        startSyncWatch();
        if (!news) return;
        if (!news->acknowledging) ++counters_.syncStalls;
        step(*news);  // the state machine logs the news and its decision
      });
}

}  // namespace dugong::agent
