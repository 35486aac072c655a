#include "agent/sync_ack_watch.h"

#include <algorithm>

namespace dugong::agent {

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
  if (sample.streaming) seenStreaming_ = true;
  if (sample.flushed) lastFlushed_ = sample.flushed;
  const bool stuck = sample.waitingCommits > 0 && !moved;
  if (!stuck) {
    stuckSinceMs_.reset();
    if (!stalled_) return std::nullopt;
    stalled_ = false;
    return SyncAcknowledgement{syncId_, true, ""};
  }
  if (!stuckSinceMs_) stuckSinceMs_ = nowMs;
  if (stalled_) return std::nullopt;
  // A sync never seen streaming since the reset is given the connection grace first.
  const int64_t from = seenStreaming_ ? *stuckSinceMs_ : std::max(*stuckSinceMs_, resetAtMs_ + connectGraceMs_ -
                                                                                      replaceAfterMs_);
  if (nowMs - from < replaceAfterMs_) return std::nullopt;
  stalled_ = true;
  return SyncAcknowledgement{syncId_, false, stuckDetail(nowMs, sample)};
}

std::string SyncAckWatch::stuckDetail(int64_t nowMs, const SyncReplicationSample& sample) const {
  const std::string waited = std::to_string(sample.waitingCommits) + (sample.waitingCommits == 1 ? " commit" : " commits") +
                             " waited " + std::to_string(nowMs - *stuckSinceMs_) + " ms";
  if (!sample.streaming) {
    return waited + " with no streaming walsender of " + syncId_ +
           (seenStreaming_ ? "" : " (not seen streaming since it became the sync)");
  }
  return waited + " while its flush position stayed at " +
         (sample.flushed ? sample.flushed->toString() : std::string("unknown"));
}

}  // namespace dugong::agent
