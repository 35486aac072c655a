#include "driver/sync_ack_watch.h"

namespace dugong::driver {

SyncAckWatch::SyncAckWatch(int64_t replaceAfterMs, int64_t connectGraceMs)
    : replaceAfterMs_(replaceAfterMs), connectGraceMs_(connectGraceMs) {}

void SyncAckWatch::reset(const std::string& syncId, int64_t nowMs) {
  syncId_ = syncId;
  resetAtMs_ = nowMs;
  seenStreaming_ = false;
  lastFlushed_.reset();
  stuckSinceMs_.reset();
  stalled_ = false;
}

std::optional<SyncAcknowledgement> SyncAckWatch::observe(int64_t nowMs, const SyncReplicationSample& sample) {
  if (syncId_.empty()) return std::nullopt;
  const bool moved = sample.streaming && sample.flushed && (!lastFlushed_ || *lastFlushed_ < *sample.flushed);
  if (sample.streaming) {
    seenStreaming_ = true;
    lastStreamingMs_ = nowMs;
  }
  if (sample.flushed) lastFlushed_ = sample.flushed;
  const bool behind = sample.primaryFlushed ? !sample.flushed || *sample.flushed < *sample.primaryFlushed
                                            : sample.waitingCommits > 0;
  const bool stuck = behind && !moved;
  if (stuck && !stuckSinceMs_) stuckSinceMs_ = nowMs;
  if (!stuck) stuckSinceMs_.reset();
  if (stalled_) {
    // Said stalled: it acknowledges again once it streams and no commit waits on it stuck.
    if (stuck || !sample.streaming) return std::nullopt;
    stalled_ = false;
    return SyncAcknowledgement{syncId_, true, ""};
  }
  // Not streaming at all, commits waiting or not, for the connection grace (since it
  // became the sync, or since it last streamed): a sync that cannot stream (dead,
  // rebuilding, on another history) would acknowledge nothing once a commit comes, and
  // a primary kept read-only until its sync caught up has no commit to wait.
  const int64_t absentSince = seenStreaming_ ? lastStreamingMs_ : resetAtMs_;
  if (!sample.streaming && nowMs - absentSince >= connectGraceMs_) {
    stalled_ = true;
    return SyncAcknowledgement{syncId_, false, absentDetail(nowMs, sample, absentSince)};
  }
  // A sync never seen streaming since the reset has the connection grace (above) instead.
  if (!stuck || !seenStreaming_ || nowMs - *stuckSinceMs_ < replaceAfterMs_) return std::nullopt;
  stalled_ = true;
  return SyncAcknowledgement{syncId_, false, stuckDetail(nowMs, sample)};
}

std::string SyncAckWatch::absentDetail(int64_t nowMs, const SyncReplicationSample& sample, int64_t absentSince) const {
  if (sample.primaryFlushed) {
    return "no streaming walsender of " + syncId_ + " for " + std::to_string(nowMs - absentSince) + " ms (" +
           (seenStreaming_ ? "since it last streamed" : "not seen streaming since it became a member") + ")";
  }
  std::string waiting = sample.waitingCommits == 0 ? "no commit waiting"
                                                   : std::to_string(sample.waitingCommits) +
                                                         (sample.waitingCommits == 1 ? " commit waiting" : " commits waiting");
  return "no streaming walsender of " + syncId_ + " for " + std::to_string(nowMs - absentSince) + " ms (" +
         (seenStreaming_ ? "since it last streamed" : "not seen streaming since it became the sync") + "; " + waiting +
         ")";
}

std::string SyncAckWatch::stuckDetail(int64_t nowMs, const SyncReplicationSample& sample) const {
  if (sample.primaryFlushed) {
    const std::string behind = "the primary's flush position was ahead of " + syncId_ + "'s for " +
                               std::to_string(nowMs - *stuckSinceMs_) + " ms (now at " + sample.primaryFlushed->toString() + ")";
    if (!sample.streaming) return behind + " with no streaming walsender of " + syncId_;
    return behind + " while its flush position stayed at " +
           (sample.flushed ? sample.flushed->toString() : std::string("unknown"));
  }
  const std::string waited = std::to_string(sample.waitingCommits) + (sample.waitingCommits == 1 ? " commit" : " commits") +
                             " waited " + std::to_string(nowMs - *stuckSinceMs_) + " ms";
  if (!sample.streaming) return waited + " with no streaming walsender of " + syncId_;
  return waited + " while its flush position stayed at " +
         (sample.flushed ? sample.flushed->toString() : std::string("unknown"));
}

}  // namespace dugong::driver
