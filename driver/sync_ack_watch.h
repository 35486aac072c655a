// Whether the primary's sync acknowledges commits, from samples of the primary's view of
// its walsender (statemachine: SyncAcknowledgement). Pure: time and samples in, a verdict
// out when it changes.
//
// The sync stalls the primary when commits wait for it and it does not move: its
// walsender is gone or not streaming, or its flush position has not advanced since the
// previous sample. A sync that is slow but moving is not stalled. A sync with no streaming
// walsender for the connection grace is stalled whether or not commits wait: it could
// acknowledge nothing, and a new primary held read-only until its sync caught up has no
// commit to wait on it.
//
// Quorum mode (docs/decisions/0079-quorum-commit.md 6.2) judges each member by the same
// rule, one watch per member, with "commits wait on it" replaced by "the primary's flush
// position is ahead of its own" (SyncReplicationSample::primaryFlushed): commits do not
// wait on one member while k others acknowledge, so waiting cannot tell.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "statemachine/event.h"
#include "statemachine/wal_position.h"

namespace dugong::driver {

// The primary's view of its synchronous standby at one moment.
struct SyncReplicationSample {
  bool streaming = false;                // a walsender of the sync is in state streaming
  std::optional<WalPosition> flushed;    // the sync's flush position (absent without walsender)
  int waitingCommits = 0;                // backends waiting for synchronous replication
  // Quorum mode: the primary's flush position at the sample; it is stuck when this is
  // ahead of its flush position and that did not move (waitingCommits is not looked at).
  std::optional<WalPosition> primaryFlushed = std::nullopt;
};

// Quorum mode: the primary's view of every member at one moment (one query): its own
// flush position, and each member's walsender; a member without one is absent.
struct QuorumReplicationSample {
  WalPosition primaryFlushed;
  std::map<std::string, SyncReplicationSample> members;  // by member id
};

class SyncAckWatch {
 public:
  // `replaceAfterMs`: how long commits may wait on a sync that does not move before it
  // is said to acknowledge nothing. `connectGraceMs`: after reset(), how long a sync
  // that has not been seen streaming yet may take to connect and start catching up;
  // and how long any sync may go without streaming, commits waiting or not.
  SyncAckWatch(int64_t replaceAfterMs, int64_t connectGraceMs);

  // A new sync or a new generation: forgets everything (the sync is acknowledging).
  void reset(const std::string& syncId, int64_t nowMs);
  // One sample taken at `nowMs`. Returns the news when the verdict changes.
  std::optional<SyncAcknowledgement> observe(int64_t nowMs, const SyncReplicationSample& sample);

  const std::string& syncId() const { return syncId_; }
  bool stalled() const { return stalled_; }

 private:
  std::string stuckDetail(int64_t nowMs, const SyncReplicationSample& sample) const;
  std::string absentDetail(int64_t nowMs, const SyncReplicationSample& sample, int64_t absentSince) const;

  int64_t replaceAfterMs_;
  int64_t connectGraceMs_;
  std::string syncId_;
  int64_t resetAtMs_ = 0;
  bool seenStreaming_ = false;
  int64_t lastStreamingMs_ = 0;
  std::optional<WalPosition> lastFlushed_;
  std::optional<int64_t> stuckSinceMs_;  // commits have waited on a sync that did not move
  bool stalled_ = false;
};

}  // namespace dugong::driver
