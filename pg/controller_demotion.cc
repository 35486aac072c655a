// demote-cluster on the postgres side (docs/decisions/0083-standby-cluster.md 5.2; phase
// 4 as built). The primary's stop for the demotion is applyNone() (a CHECKPOINT, then a
// fast shutdown while its sync still streams: the walsenders send everything, the
// shutdown checkpoint included, before they exit). Then:
//  - readStoppedWal: where the WAL of a primary that was shut down cleanly ends, its
//    shutdown checkpoint (pg_controldata), with its timelines: the demotion's point;
//  - rewindForDemotion: the standby leader of the generation the demotion began
//    (PgConfig::demoted) is a data directory that last ran as this site's primary. If its
//    history forked from the source's (the old site after the other's promote-cluster),
//    pg_rewind from the source's writable host discards what it wrote past the fork (the
//    operator's command is the authority for that; the range is logged). Never a copy.
#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/wal_dir.h"

#include <spdlog/spdlog.h>

namespace dugong::pg {

WalPositionRead PgController::readStoppedWal() {
  WalPositionRead out;
  auto cluster = controlValue("Database cluster state:");
  if (!cluster) {
    out.error = "postgres is not running, and " + cluster.error();
    return out;
  }
  if (cluster.value() != "shut down") {
    // A standby's "shut down in recovery" names its last restartpoint, not where its WAL
    // ends; a crashed primary's WAL ends past its last checkpoint. Neither is read here.
    out.error = "postgres is not running (its data directory is \"" + cluster.value() +
                "\", not a primary shut down cleanly): no WAL position to read";
    return out;
  }
  auto text = controlValue("Latest checkpoint location:");
  auto pos = text ? WalPosition::parse(text.value()) : Result<WalPosition>(Error{text.error()});
  if (!pos) {
    out.error = "cannot read where the WAL of the stopped primary ends: " + pos.error();
    return out;
  }
  auto history = readTimelineHistory(options_.dataDir + "/pg_wal", pos.value());
  if (!history) {
    out.error = "cannot read the timelines of the WAL: " + history.error();
    return out;
  }
  spdlog::info("pg: postgres is stopped, shut down cleanly as a primary: its WAL ends at its shutdown checkpoint, "
               "{} ({})",
               pos->toString(), history->describe());
  out.position = pos.value();
  out.history = std::move(history.value());
  return out;
}

std::optional<PgConfigApplied> PgController::rewindForDemotion(const SourceEndpoint& source, bool running) {
  if (running) {
    // Its stop for the demotion came first (applyNone); a postgres found running again
    // (started by hand) is stopped the same way before it is compared.
    checkpointBeforeCleanStop();
    if (auto s = stop(); !s) return failed(s.error(), isRunning());
  }
  const SourceRead writable = readSource(source);
  if (source.kind == SourceKind::kDugong && writable.error.empty() && writable.wal && writable.timeline) {
    // A dugong source's peer is the other site's sync, in recovery (pg_rewind's check of
    // what is ahead needs a source out of recovery). The planned switch (0083 5.3): it
    // streamed this site's WAL, so on this site's timeline and at or past where this
    // site's WAL ended it holds this history: nothing to compare or rewind.
    const WalPositionRead end = readStoppedWal();
    auto theirs = WalPosition::parse(*writable.wal);
    if (end.position && end.history && theirs && *writable.timeline == end.history->timeline &&
        !(theirs.value() < *end.position)) {
      spdlog::info("pg: demoted: the source peer {} holds this site's WAL up to {} on timeline {} (it is at {}): "
                   "this data directory follows it as it is (no rewind)",
                   writable.host, end.position->toString(), end.history->timeline, *writable.wal);
      return std::nullopt;
    }
  }
  if (!writable.error.empty()) {
    return failed("the source " + source.describe() + " has no writable host to compare this demoted data "
                      "directory with (" + writable.error + "): postgres stays stopped until one answers",
                  false);
  }
  PeerIdentity from;
  from.id = "the source's writable host " + writable.host;
  from.pgUrl = "tcp://" + options_.replicationUser + "@" + writable.host + "/postgres";
  std::string detail, discarded;
  const Divergence d = rewindIfDiverged(from, &detail, &discarded);
  switch (d) {
    case Divergence::kCanFollow:
      spdlog::info("pg: demoted: this data directory follows {} as it is (no rewind required)", from.id);
      return std::nullopt;
    case Divergence::kRewound:
      spdlog::warn("pg: demoted: pg_rewind from {} discarded {}, written by this site after the source's history "
                   "forked from it (demote-cluster)",
                   from.id, discarded);
      return std::nullopt;
    case Divergence::kAhead:
      if (source.kind == SourceKind::kDugong) {
        // A dugong source's peer is the other site's sync, a standby itself: in the planned
        // switch (0083 5.3) it may not have received this site's shutdown checkpoint yet.
        return failed("this demoted data directory is ahead of the source peer (" + detail +
                          "): waiting for it to receive this site's last WAL (postgres stays stopped)",
                      false);
      }
      return refused("this demoted data directory is ahead of the source on the same timeline (" + detail +
                         "): it cannot follow, and only a copy helps (dugong-adm rebuild). Nothing was changed",
                     false);
    case Divergence::kDiverged:
    case Divergence::kUnknown:
      break;
  }
  return failed("comparing this demoted data directory with " + from.id + " failed: " + detail, false);
}

}  // namespace dugong::pg
