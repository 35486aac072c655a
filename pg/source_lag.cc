#include "pg/source_lag.h"

#include <cstdio>

#include "pg/json_or_null.h"
#include "pg/lsn_bytes.h"
#include "statemachine/time_format.h"

namespace dugong::pg {
namespace {

std::optional<uint64_t> behind(const std::optional<uint64_t>& ahead, const std::optional<uint64_t>& pos) {
  if (!ahead || !pos) return std::nullopt;
  return *ahead > *pos ? *ahead - *pos : 0;
}

}  // namespace

SourceLag computeSourceLag(const std::string& source, const LeaderReplay& leader, const SourceRead& read,
                           const SourceLag* previous, int64_t nowMs) {
  SourceLag l;
  l.source = source;
  l.sampledAtMs = nowMs;
  l.leader = leader;
  if (previous && previous->source != source) previous = nullptr;  // another source: nothing carries over
  if (read.error.empty() && read.wal) {
    l.sourceWal = read.wal;
    l.sourceTimeline = read.timeline;
    l.sourcePrimary = read.host;
    l.sourceSeenAtMs = nowMs;
  } else {
    l.sourceError = read.error.empty() ? "no WAL position in its answer" : read.error;
    if (previous) {
      l.sourceWal = previous->sourceWal;
      l.sourceTimeline = previous->sourceTimeline;
      l.sourcePrimary = previous->sourcePrimary;
      l.sourceSeenAtMs = previous->sourceSeenAtMs;
    }
  }
  // The receiver's timeline, else the last one seen (a fenced or stopped receiver has none).
  std::optional<int64_t> receivedTimeline = leader.receivedTimeline;
  if (!receivedTimeline && previous) receivedTimeline = previous->leader.receivedTimeline;
  l.leader.receivedTimeline = receivedTimeline;
  const auto sourceBytes = lsnBytes(l.sourceWal);
  const auto received = lsnBytes(leader.receivedLsn);
  const auto replayed = lsnBytes(leader.replayedLsn);
  if (!sourceBytes) {
    l.unknownWhy = "the source's position was never read: " + l.sourceError;
  } else if (!received && !replayed) {
    l.unknownWhy = "this leader has received nothing yet";
  } else if (l.sourceTimeline && receivedTimeline && *l.sourceTimeline != *receivedTimeline) {
    l.unknownWhy = "the source is on timeline " + std::to_string(*l.sourceTimeline) + ", this leader received on " +
                   std::to_string(*receivedTimeline);
  } else {
    // A leader restarted without a receiver has received nothing since: its replay is
    // what it holds.
    l.lagBytes = behind(sourceBytes, received ? received : replayed);
    l.replayLagBytes = behind(sourceBytes, replayed ? replayed : received);
  }
  if (l.replayLagBytes) {
    // Unknown while nothing was replayed since postgres started (no replay timestamp).
    l.lagSeconds = *l.replayLagBytes == 0 ? std::optional<double>(0.0) : leader.lastReplayAgeSeconds;
  }
  // A stall: the source answered ahead of what was received, and received has not moved
  // since the previous sample.
  const bool ahead = l.sourceAnswered() && l.lagBytes && *l.lagBytes > 0;
  if (ahead && previous && received && lsnBytes(previous->leader.receivedLsn) == received) {
    l.receivingStalledSinceMs = previous->receivingStalledSinceMs ? previous->receivingStalledSinceMs
                                                                  : previous->sampledAtMs;
  }
  return l;
}

std::string SourceLag::describe() const {
  if (!lagBytes) {
    // What the leader holds, all the same: what a promotion with the source gone keeps.
    const bool holds = leader.receivedLsn || leader.replayedLsn;
    return "lag to " + source + " unknown: " + unknownWhy +
           (holds ? "; received " + leader.receivedLsn.value_or("-") + ", replayed " + leader.replayedLsn.value_or("-")
                  : "");
  }
  char buf[96];
  if (lagSeconds) {
    std::snprintf(buf, sizeof buf, "%.1f MB and %.1f s", static_cast<double>(*lagBytes) / (1024.0 * 1024.0),
                  *lagSeconds);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MB and an unknown time", static_cast<double>(*lagBytes) / (1024.0 * 1024.0));
  }
  std::string text = std::string(sourceAnswered() ? "" : "at least ") + buf + " behind " + source + " (" +
                     (sourcePrimary.empty() ? std::string() : "its primary " + sourcePrimary + ", ") + "its WAL at " +
                     sourceWal.value_or("?") + " on timeline " +
                     (sourceTimeline ? std::to_string(*sourceTimeline) : std::string("?")) + ", read at " +
                     formatIso8601(sourceSeenAtMs) + "; received " + leader.receivedLsn.value_or("-") +
                     ", replayed " + leader.replayedLsn.value_or("-") + ")";
  if (!sourceAnswered()) text += "; the source does not answer now: " + sourceError;
  return text;
}

nlohmann::json SourceLag::toJson() const {
  return {{"source", source},
          {"sampledAt", sampledAtMs},
          {"sourceWal", jsonOrNull(sourceWal)},
          {"sourceTimeline", jsonOrNull(sourceTimeline)},
          {"sourcePrimary", sourcePrimary.empty() ? nlohmann::json(nullptr) : nlohmann::json(sourcePrimary)},
          {"sourceSeenAt", sourceSeenAtMs},
          {"sourceReachable", sourceAnswered()},
          {"sourceError", sourceError.empty() ? nlohmann::json(nullptr) : nlohmann::json(sourceError)},
          {"receivedLsn", jsonOrNull(leader.receivedLsn)},
          {"replayedLsn", jsonOrNull(leader.replayedLsn)},
          {"receivedTimeline", jsonOrNull(leader.receivedTimeline)},
          {"walReceiverStatus", jsonOrNull(leader.walReceiverStatus)},
          {"streamingFrom", jsonOrNull(leader.senderHost)},
          {"lastReplayTimestamp", jsonOrNull(leader.lastReplayTimestamp)},
          {"lagBytes", jsonOrNull(lagBytes)},
          {"replayLagBytes", jsonOrNull(replayLagBytes)},
          {"lagSeconds", jsonOrNull(lagSeconds)},
          {"lagUnknown", unknownWhy.empty() ? nlohmann::json(nullptr) : nlohmann::json(unknownWhy)},
          {"receivingStalledSince", receivingStalledSinceMs},
          {"summary", describe()}};
}

}  // namespace dugong::pg
