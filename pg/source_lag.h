// How far a standby cluster's leader is behind its source (docs/decisions/0083 3.5, as
// built in phase 3): what /state, /metrics, `dugong-adm show`, `verify` and
// promote-cluster report. The adapter samples it at each status poll of a standby leader
// (PgController::sampleSourceLag): the source's WAL flush position by IDENTIFY_SYSTEM over
// the leader's own replication conninfo (the writable host of a `hosts` source), and the
// leader's received and replayed positions. The arithmetic is here, pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dugong::pg {

// What the leader's postgres says about itself at one sample.
struct LeaderReplay {
  std::optional<std::string> receivedLsn;   // pg_last_wal_receive_lsn()
  std::optional<std::string> replayedLsn;   // pg_last_wal_replay_lsn()
  std::optional<int64_t> receivedTimeline;  // pg_stat_wal_receiver.received_tli
  std::optional<std::string> walReceiverStatus;  // pg_stat_wal_receiver.status; unset: no receiver
  std::optional<std::string> senderHost;    // the host it streams from (sender_host:sender_port)
  std::optional<double> lastReplayAgeSeconds;  // now() - pg_last_xact_replay_timestamp()
  std::optional<std::string> lastReplayTimestamp;
};

// What the source said at one sample: IDENTIFY_SYSTEM's xlogpos and timeline, asked of
// each host in turn with target_session_attrs=primary, so the one that answers is the
// source's writable host (error set: none answered).
struct SourceRead {
  std::string error;
  std::string host;  // "host:port" of the one that answered (a hosts source's writable host)
  std::optional<std::string> wal;
  std::optional<int64_t> timeline;
};

struct SourceLag {
  std::string source;        // the source as described ("hosts 10.0.0.5:5432, ...")
  int64_t sampledAtMs = 0;   // this sample (wall clock, ms since the epoch)
  // The source's WAL flush position and timeline at the last sample it answered, and
  // when (0: it never answered since this leader began following it); `sourceError`
  // set: it did not answer this time, and the lag below is the one measured then (the
  // real lag is at least that).
  std::optional<std::string> sourceWal;
  std::optional<int64_t> sourceTimeline;
  std::string sourcePrimary;  // the host that answered: the source's writable host
  int64_t sourceSeenAtMs = 0;
  std::string sourceError;
  LeaderReplay leader;
  // source WAL - received, and - replayed, when both are on the source's timeline (the
  // leader's receiver on it); else unset with `unknownWhy`.
  std::optional<uint64_t> lagBytes;
  std::optional<uint64_t> replayLagBytes;
  std::string unknownWhy;
  // 0 when replay has reached what the source had at its last answer (an idle source
  // writes no transaction, and "since the last one replayed" would grow); else the age
  // of the last transaction replayed.
  std::optional<double> lagSeconds;
  // Since when the received position has not moved while the source is ahead of it (0:
  // it moves, or it has all the source had, or the source did not answer).
  int64_t receivingStalledSinceMs = 0;

  bool sourceAnswered() const { return sourceError.empty(); }
  // A WAL receiver streaming.
  bool receiving() const { return leader.walReceiverStatus == std::optional<std::string>("streaming"); }
  // "at least 14.0 MB and 3.2 s behind hosts ... (its position 0/9AE00000 at 00:12:03)".
  std::string describe() const;
  nlohmann::json toJson() const;
};

// The next sample from this one's reads, at `nowMs`, given the previous sample of the
// same source (nullptr: the first): the source's last answer is kept while it does not
// answer, and the stall is timed from the previous received position.
SourceLag computeSourceLag(const std::string& source, const LeaderReplay& leader, const SourceRead& read,
                           const SourceLag* previous, int64_t nowMs);

}  // namespace dugong::pg
