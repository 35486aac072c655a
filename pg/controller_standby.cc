#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/plan/rebuild.h"
#include "pg/plan/transition.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

PgConfigApplied PgController::applyStandby(const PgConfig& config, const RebuildRules& rules, PgRejoined* report) {
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
  }
  if (!config.upstream) return failed("a standby role needs an upstream", isRunning());
  const PeerIdentity& upstream = *config.upstream;
  const PeerIdentity& restore = config.restorePeer ? *config.restorePeer : upstream;
  if (upstream.id == options_.peerId) return failed("this peer cannot stream from itself", isRunning());
  auto conninfo = peerConninfo(upstream, true);
  if (!conninfo) return failed(conninfo.error(), isRunning());
  ManagedState previous;
  {
    std::lock_guard lock(stateMu_);
    previous = state_;
  }
  ManagedState want;
  want.role = config.role == PgRole::kSync ? "sync" : "async";
  want.upstreamId = upstream.id;
  want.primaryConninfo = conninfo.value();
  want.readOnly = false;
  want.upstreamUrl = upstream.pgUrl;
  std::string repair;  // non-empty: a standby that cannot follow its upstream is repaired
  {
    std::lock_guard lock(stateMu_);
    repair = std::exchange(repairFor_, "");
    repairAtOnce_ = config.repairAtOnce;
  }
  // Which step (pg/plan/transition.h): asked first as if it were in recovery, before a
  // slot or a system identifier is read; then again, with the facts known.
  bool running = isRunning();
  StandbyFacts facts;
  facts.running = running;
  facts.setUp = isSetUp();
  facts.inRecovery = true;
  facts.hasStandbySignal = hasStandbySignal();
  facts.wasPrimary = previous.wasPrimary;
  facts.sameUpstream = previous.upstreamId == upstream.id && previous.primaryConninfo == want.primaryConninfo;
  facts.repair = !repair.empty();
  if (planStandby(facts) == StandbyStep::kRoleOnly) {
    // Already following this upstream (its system checked when it started to; e.g. an
    // async becoming the new primary's sync): only the role changes. Nothing on the
    // path of a failover waits for a slot or a system identifier to be read again, and
    // the WAL receiver is not restarted (a new primary_slot_name would restart it).
    auto q = localQuery("SELECT pg_is_in_recovery()");
    if (q && q->rows[0][0] == "t") {
      want.slotName = previous.slotName;
      auto w = writeConf(want);
      if (!w) return failed(w.error(), true);
      // The file may also hold settings changed since it was last read (the cluster's
      // configuration): a reload, not a restart, so the WAL receiver keeps streaming.
      if (auto r = reload(); !r) return failed(r.error(), true);
      spdlog::info("pg: already streaming from {} ({}): only the role changes", upstream.id,
                   want.slotName ? "through slot " + *want.slotName
                                 : "without a slot; one is created at its next change of upstream");
      return succeeded(true);
    }
  }
  want.slotName = prepareSlot(upstream, previous);

  bool verified = false;
  bool replaceOther = false;
  if (isSetUp()) {
    // Before anything else, not even a stop: data of another database system is
    // never replaced without the operator's command.
    auto other = guardOtherSystem(restore, &verified);
    if (!other) return refused(other.error(), running);
    replaceOther = other.value();
  }
  if (running && isSetUp() && !replaceOther) {
    auto q = localQuery("SELECT pg_is_in_recovery()");
    if (!q) return failed("cannot ask postgres whether it is in recovery: " + q.error(), true);
    facts.setUp = true;
    facts.inRecovery = q->rows[0][0] == "t";
    facts.sameUpstream = false;  // asked above
    facts.replaceOther = replaceOther;
    if (planStandby(facts) == StandbyStep::kReload) {
      // A running standby: a new upstream is a reload (primary_conninfo is reloadable).
      auto w = writeConf(want);
      if (!w) return failed(w.error(), true);
      auto r = reload();
      if (!r) return failed(r.error(), true);
      return succeeded(true);
    }
    if (repair.empty()) spdlog::info("pg: this primary becomes a standby: stopping it first");
  }
  if (!repair.empty()) {
    spdlog::warn("pg: repairing this standby, which cannot follow its upstream {} ({}): stopping it, then pg_rewind "
                 "from {}, else pg_basebackup",
                 upstream.id, repair, restore.id);
  }
  auto s = stop();
  if (!s) return failed(s.error(), isRunning());

  // How the stopped data directory comes to follow `restore` (pg/plan/rebuild.h).
  RebuildFacts dir;
  dir.setUp = isSetUp();
  dir.replaceOther = replaceOther;
  dir.repair = repair;
  dir.hasStandbySignal = hasStandbySignal();
  dir.wasPrimary = previous.wasPrimary;
  const RebuildStart first = planRebuildStart(dir, rules);
  if (first.step == RebuildStep::kNothingToUse) {
    return failed("no usable data directory to rejoin with; nothing was changed", false);
  }
  if (first.step == RebuildStep::kBasebackup) {
    spdlog::info("pg: {}: making a new copy to follow {} (the replica methods of backup.replica-methods in order, "
                 "by pg_basebackup when it names none)",
                 first.why, restore.id);
    auto b = createReplica(restore);
    if (!b) return failed(b.error(), false);
    {
      // Its upstream, unreachable now and copied later, may start past the WAL this copy
      // needs next.
      std::lock_guard lock(stateMu_);
      copiedBeforeUpstream_ = upstream.id != restore.id && !want.slotName;
    }
  } else if (first.step == RebuildStep::kCompare) {
    std::string detail;
    std::string discarded;
    auto recovered = finishCrashRecovery(previous.wasPrimary);
    if (!recovered) spdlog::warn("pg: cannot finish crash recovery before pg_rewind: {}", recovered.error());
    // With a rewind allowed, pg_rewind runs once, for real: it changes nothing when no
    // rewind is required, and a separate dry run would read the same WAL twice.
    const bool atOnce = rewindAtOnce(rules, verified);
    auto d = atOnce ? rewindIfDiverged(restore, &detail, &discarded) : checkDivergence(restore, &detail);
    switch (planAfterCompare(d, verified, options_.replaceUnknownData, rules)) {
      case RebuildOutcome::kFollow:
        spdlog::info("pg: the data directory can follow {} as it is: {}", restore.id, detail);
        break;
      case RebuildOutcome::kFollowRewound:
        spdlog::warn("pg: rewound the data directory to follow {}: discarded {}", restore.id, discarded);
        if (report) {
          report->rewound = true;
          report->discarded = discarded;
        }
        break;
      case RebuildOutcome::kRefuseAhead:
        spdlog::warn("pg: the data directory cannot follow {} as it is ({})", restore.id, detail);
        return refused("refusing to replace the data directory " + options_.dataDir + ": it has WAL that " +
                           restore.id + " does not have (" + detail + "). Nothing was changed. " + kDiscardCommand,
                       false);
      case RebuildOutcome::kFailUnverified:
        spdlog::warn("pg: the data directory cannot follow {} as it is ({})", restore.id, detail);
        return failed("not rebuilding from " + restore.id + ": its system identifier could not be compared with "
                          "this data directory's (" + detail + ")",
                      false);
      case RebuildOutcome::kFailNoCopy:
        spdlog::warn("pg: the data directory cannot follow {} as it is ({})", restore.id, detail);
        return failed(std::string(rules.rewind ? "pg_rewind failed" : "it cannot follow without discarding WAL") +
                          " (" + detail + "); the data directory was not copied: `dugong-adm rebuild` rebuilds it",
                      false);
      case RebuildOutcome::kBasebackup: {
        spdlog::warn("pg: the data directory cannot follow {} as it is ({})", restore.id, detail);
        if (d == Divergence::kUnknown && atOnce) {
          spdlog::warn("pg: pg_rewind failed, falling back to a new copy (the replica methods of "
                       "backup.replica-methods in order, pg_basebackup when it names none): {}",
                       detail);
        }
        auto b = createReplica(restore);
        if (!b) return failed(b.error(), false);
        break;
      }
    }
  }
  auto w = writeConf(want);
  if (!w) return failed(w.error(), false);
  auto sig = writeFileAsOwner(options_.dataDir + "/standby.signal", "", 0600);
  if (!sig) return failed(sig.error(), false);
  auto st = start();
  if (!st) return failed(st.error(), isRunning());
  discardOldDataDir();
  return succeeded(true);
}

PgRejoined PgController::rejoin(const PeerIdentity& primary, RejoinLimit limit) {
  std::lock_guard lock(applyMu_);
  spdlog::info("pg: rejoining {} as an async standby of {} ({})", options_.dataDir, primary.id,
               limit == RejoinLimit::kRewind ? "pg_rewind allowed" : "only if it can follow as it is");
  {
    std::lock_guard stateLock(stateMu_);
    fence_.reset();
  }
  PgRejoined out;
  if (auto readable = checkDataDirReadable(); !readable) {
    out.error = readable.error();
    return out;
  }
  if (!isSetUp()) {
    out.error = "the data directory " + options_.dataDir + " is not set up: only `dugong-adm rebuild` can copy one";
    return out;
  }
  auto applied = applyStandby(PgConfig::standby(PgRole::kAsync, primary, primary),
                              RebuildRules{limit == RejoinLimit::kRewind, false}, &out);
  out.ok = applied.ok;
  out.error = applied.error;
  if (out.ok) {
    spdlog::info("pg: rejoined as an async standby of {}{}", primary.id,
                 out.rewound ? ", after discarding " + out.discarded : ", nothing discarded");
  } else {
    spdlog::warn("pg: not rejoined: {}", out.error);
    // Left stopped, as role none had it: the driver tries again from there.
    if (isRunning()) {
      if (auto s = stop(); !s) spdlog::warn("pg: could not stop postgres after the failed rejoin: {}", s.error());
    }
  }
  return out;
}

}  // namespace dugong::pg
