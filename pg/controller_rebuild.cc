#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/plan/rebuild.h"
#include "pg/rewound_wal.h"
#include "pg/wal_dir.h"
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {
// The names of the ".ready" files in pg_wal/archive_status (none if it cannot be read).
std::set<std::string> readyArchiveStatusFiles(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".ready") == 0) out.insert(name);
  }
  return out;
}
}  // namespace

// ---------------------------------------------------------------- rebuilding

Result<std::string> PgController::controlValue(const std::string& key, const std::string& dataDir) {
  auto ctl = run("pg_controldata", {"-D", dataDir.empty() ? options_.dataDir : dataDir}, 30s);
  auto at = ctl.output.find(key);
  if (!ctl.ok() || at == std::string::npos) return Error{"pg_controldata " + ctl.describe()};
  auto endl = ctl.output.find('\n', at);
  std::string value = ctl.output.substr(at + key.size(), endl - at - key.size());
  value.erase(0, value.find_first_not_of(' '));
  return value;
}

Result<bool> PgController::finishCrashRecovery(bool ownSignal) {
  auto cluster = controlValue("Database cluster state:");
  if (!cluster) return Error{cluster.error()};
  const std::string state = cluster.value();
  if (state == "shut down" || state == "shut down in recovery") return false;
  std::error_code ec;
  const std::string signal = options_.dataDir + "/standby.signal";
  const std::string aside = options_.dataDir + ".dugong-standby.signal";
  if (ownSignal && hasStandbySignal() && !fs::exists(options_.dataDir + "/recovery.signal", ec)) {
    // Written by applyNone() to keep a stopped ex-primary from starting writable; its
    // WAL is a primary's, which single-user mode replays like a normal start.
    fs::rename(signal, aside, ec);
    if (ec) return Error{"cannot set " + signal + " aside: " + ec.message()};
  }
  struct PutBack {
    const std::string& from;
    const std::string& to;
    ~PutBack() {
      std::error_code e;
      if (fs::exists(from, e)) fs::rename(from, to, e);
    }
  } putBack{aside, signal};
  if (hasStandbySignal() || fs::exists(options_.dataDir + "/recovery.signal", ec)) {
    return Error{"the data directory was not shut down cleanly (" + state +
                 ") and has a recovery signal file, which single-user mode cannot replay"};
  }
  // pg_rewind (dry run or not) needs a cleanly shut down target. Single-user mode
  // replays the WAL and writes a shutdown checkpoint without listening on any socket,
  // so no client can connect meanwhile; nothing is discarded: it is the recovery a
  // normal start would do.
  spdlog::info("pg: the data directory was not shut down cleanly ({}): finishing crash recovery in single-user mode "
               "(what a start does, with no client) so that its WAL's end can be read, and compared by pg_rewind",
               state);
  if (isRunning()) return Error{"postgres is running in " + options_.dataDir};
  removeStaleLockFiles();
  // Its checkpoints would remove the WAL segments before their redo point, among them the
  // one holding the last checkpoint before the fork, which pg_rewind reads: run with
  // archiving on and a command that always fails, so that every segment is kept
  // (pg/plan/rebuild.h). The archive status files this leaves are removed afterwards
  // unless the configuration archives WAL, where they are what postgres itself writes.
  const std::string statusDir = options_.dataDir + "/pg_wal/archive_status";
  const std::set<std::string> readyBefore = readyArchiveStatusFiles(statusDir);
  std::vector<std::string> args{"--single", "-D", options_.dataDir};
  for (const auto& [name, value] : crashRecoverySettingsKeepingWal()) {
    args.push_back("-c");
    args.push_back(name + "=" + value);
  }
  args.push_back("template1");
  CommandResult r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    r = run("postgres", args, options_.rewindTimeout);
    if (r.ok() || !killedBackendsHoldMemory(r.output)) break;
  }
  if (!r.ok()) return Error{"single-user crash recovery " + r.describe() + ": " + oneLine(lastLines(r.output, 3))};
  const auto mode = effectiveOptions("primary").settings;
  const auto archiving = mode.find("archive_mode");
  if (archiving == mode.end() || archiving->second == "off") {
    std::error_code e;
    for (const auto& name : readyArchiveStatusFiles(statusDir)) {
      if (!readyBefore.count(name)) fs::remove(statusDir + "/" + name, e);
    }
  }
  return true;
}

Divergence PgController::checkDivergence(const PeerIdentity& source, std::string* detail) {
  auto conninfo = peerConninfo(source, false);
  if (!conninfo) {
    *detail = conninfo.error();
    return Divergence::kUnknown;
  }
  const std::string queryConninfo = sourceQueryConninfo(conninfo.value());
  checkpointSource(source, queryConninfo);
  auto r = run("pg_rewind", {"--dry-run", "-D", options_.dataDir, "--source-server=" + conninfo.value()},
               options_.rewindTimeout, clientEnv());
  *detail = oneLine(lastLines(r.output, 3));
  // "servers diverged at X ... no rewind required": the local WAL ends at the fork.
  bool noRewind = r.ok() && r.output.find("no rewind required") != std::string::npos;
  if (!noRewind && r.output.find("servers diverged at") != std::string::npos) return Divergence::kDiverged;
  if (!noRewind) return Divergence::kUnknown;
  if (r.output.find("same timeline") == std::string::npos) return Divergence::kCanFollow;
  return aheadOnSameTimeline(source, queryConninfo, detail);
}

void PgController::checkpointSource(const PeerIdentity& source, const std::string& queryConninfo) {
  // A just-promoted source shows its new timeline in pg_control only after a checkpoint.
  const auto started = std::chrono::steady_clock::now();
  auto cp = runQuery(queryConninfo, "CHECKPOINT", std::max<std::chrono::milliseconds>(options_.queryTimeout, 60s));
  const auto ms = msSince(started);
  if (!cp) {
    spdlog::warn("pg: CHECKPOINT on {} failed after {} ms: {}", source.id, ms, cp.error());
  } else {
    spdlog::info("pg: CHECKPOINT on {} (so that pg_rewind sees its timeline) took {} ms", source.id, ms);
  }
}

std::string PgController::sourceQueryConninfo(const std::string& conninfo) const {
  // For our own queries (not for argv, where others could read it) with the password.
  if (!options_.replicationPassword) return conninfo;
  return conninfo + " " + buildConninfo({{"password", *options_.replicationPassword}});
}

Divergence PgController::aheadOnSameTimeline(const PeerIdentity& source,
                                                           const std::string& queryConninfo, std::string* detail) {
  // Same timeline: the local data directory must not be ahead of the source. Its WAL ends
  // where its last checkpoint record ends (pg_control gives where it starts), and the
  // source's position is an end too; a source still in recovery may not show its new
  // timeline yet, so it is asked again later (safety review item 6).
  auto text = controlValue("Latest checkpoint location:");
  if (!text) return Divergence::kUnknown;
  auto local = WalPosition::parse(text.value());
  if (!local) return Divergence::kUnknown;
  auto remote = runQuery(queryConninfo,
                         "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                         "ELSE pg_current_wal_lsn() END::text",
                         options_.queryTimeout);
  if (!remote || remote->rows.empty() || !remote->rows[0][1]) return Divergence::kUnknown;
  if (remote->rows[0][0] == "t") {
    *detail = source.id + " is still in recovery: whether this data directory is ahead is asked again once it is not";
    return Divergence::kUnknown;
  }
  auto there = WalPosition::parse(*remote->rows[0][1]);
  if (!there) return Divergence::kUnknown;
  auto end = checkpointRecordEnd(local.value());
  if (!end) {
    *detail = "same timeline, but the end of the local checkpoint record at " + local->toString() +
              " cannot be read: " + end.error();
    return Divergence::kUnknown;
  }
  if (end.value() > there.value()) {
    *detail = "same timeline, but the local WAL ends at " + end->toString() + " (its checkpoint record at " +
              local->toString() + "), ahead of " + source.id + " at " + there->toString();
    return Divergence::kAhead;
  }
  return Divergence::kCanFollow;
}

Result<WalPosition> PgController::checkpointRecordEnd(const WalPosition& start) {
  // pg_waldump gives the record's total length; its end adds the page headers of the
  // pages it continues on (pg/wal_dir.h).
  auto r = run("pg_waldump", {"-p", options_.dataDir + "/pg_wal", "-s", start.toString(), "-n", "1"}, 30s);
  const std::string key = "len (rec/tot):";
  auto at = r.output.find(key);
  if (!r.ok() || at == std::string::npos) return Error{"pg_waldump " + r.describe() + ": " + oneLine(lastLines(r.output, 2))};
  auto slash = r.output.find('/', at + key.size());
  if (slash == std::string::npos) return Error{"pg_waldump printed no record length"};
  const long total = std::strtol(r.output.c_str() + slash + 1, nullptr, 10);
  if (total <= 0) return Error{"pg_waldump printed no record length"};
  return walRecordEnd(start, static_cast<uint64_t>(total));
}

Result<std::string> PgController::localSystemId() { return controlValue("Database system identifier:"); }

Result<PeerDataState> PgController::dataState() {
  PeerDataState out;
  if (auto readable = checkDataDirReadable(); !readable) return Error{readable.error()};
  out.setUp = isSetUp();
  if (!out.setUp) return out;
  // A directory that was not shut down cleanly (a killed primary): pg_control's latest
  // checkpoint may lie far behind the end of its WAL, and after a promotion still be on
  // the old timeline. Its crash recovery (what a start does, without any client) is
  // finished first: the shutdown checkpoint it writes is at the end of its WAL, on the
  // timeline it reached. A standby's own recovery (standby.signal it did not get from
  // role none) is not replayed here: its minimum recovery point says how far it got.
  bool ownSignal = false;
  {
    std::lock_guard lock(stateMu_);
    ownSignal = state_.wasPrimary || state_.role == "primary";
  }
  if (isRunning()) return Error{"postgres is running in " + options_.dataDir + ": its data state is not final"};
  if (ownSignal || !hasStandbySignal()) {
    auto recovered = finishCrashRecovery(ownSignal);
    if (!recovered) return Error{"cannot finish the crash recovery of " + options_.dataDir + ": " + recovered.error()};
  }
  auto ctl = run("pg_controldata", {"-D", options_.dataDir}, 30s);
  if (!ctl.ok()) return Error{"pg_controldata " + ctl.describe()};
  auto value = [&](const std::string& key) -> std::string {
    auto at = ctl.output.find(key);
    if (at == std::string::npos) return "";
    auto endl = ctl.output.find('\n', at);
    std::string v = ctl.output.substr(at + key.size(), endl - at - key.size());
    v.erase(0, v.find_first_not_of(' '));
    return v;
  };
  out.systemId = value("Database system identifier:");
  auto checkpoint = WalPosition::parse(value("Latest checkpoint location:"));
  auto recovery = WalPosition::parse(value("Minimum recovery ending location:"));
  const std::string checkpointTli = value("Latest checkpoint's TimeLineID:");
  const std::string recoveryTli = value("Min recovery ending loc's timeline:");
  if (out.systemId.empty() || !checkpoint || checkpointTli.empty()) {
    return Error{"pg_controldata gave no system identifier, checkpoint location or timeline"};
  }
  out.wal = *checkpoint;
  out.timeline = std::stoll(checkpointTli);
  if (recovery && *recovery > out.wal) out.wal = *recovery;
  if (!recoveryTli.empty() && std::stoll(recoveryTli) > out.timeline) out.timeline = std::stoll(recoveryTli);
  // The timelines its WAL came from, so that a setup compares histories, not only
  // timeline numbers (statemachine/data_state.h). Without them, the setup falls back
  // to the numbers.
  auto history = readTimelineHistory(options_.dataDir + "/pg_wal", out.wal);
  if (history && history->timeline == out.timeline) {
    out.ancestors = history->ancestors;
  } else {
    spdlog::warn("pg: the timelines of the WAL up to {} are not known ({}): published without them",
                 out.wal.toString(),
                 history ? "its WAL is on timeline " + std::to_string(history->timeline) + ", pg_control names " +
                               std::to_string(out.timeline)
                         : history.error());
  }
  spdlog::info("pg: data state: {}{}", out.describe(),
               out.ancestors ? ", " + TimelineHistory{out.timeline, *out.ancestors}.describe() : "");
  return out;
}

Result<bool> PgController::guardOtherSystem(const PeerIdentity& source, bool* verified) {
  *verified = false;
  auto local = localSystemId();
  if (!local) return false;
  if (!peerConninfo(source, true)) return false;
  auto remote = remoteSystemId(source);
  if (!remote) {
    spdlog::warn("pg: {}", remote.error());
    return false;
  }
  *verified = true;
  const std::string there = remote.value();
  if (there == local.value()) return false;
  if (options_.replaceUnknownData) {
    spdlog::warn("pg: replacing database system {} in {} by {}'s {}, as the operator's command says", local.value(),
                 options_.dataDir, source.id, there);
    return true;
  }
  return Error{"refusing to replace the data directory " + options_.dataDir + ": it holds database system " +
               local.value() + ", and " + source.id + " serves another one, " + there +
               " (the ZooKeeper state was lost or rebuilt, or this agent has the wrong cluster name). Nothing "
               "was changed. " + kDiscardCommand};
}

namespace {
// One syncfs() per file system holding one of `paths`: makes everything written there
// durable.
Result<bool> syncFileSystems(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Error{"cannot open " + path + " to sync its file system: " + std::strerror(errno)};
    // Since Linux 5.8 syncfs() also reports write-back errors of the file system.
    const int rc = ::syncfs(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return Error{"syncfs of " + path + "'s file system failed: " + std::strerror(err)};
  }
  return true;
}
}  // namespace

CommandResult PgController::rewind(const PeerIdentity& source) {
  auto conninfo = peerConninfo(source, false);
  if (!conninfo) {
    CommandResult r;
    r.exitCode = -1;
    r.output = conninfo.error();
    return r;
  }
  setMarker(kRewindMarker);
  // --no-sync, then syncfs() of the file systems holding the data directory and its
  // WAL: the same durability as pg_rewind's own sync (everything it wrote is on disk
  // before the marker is cleared and postgres starts), without opening and fsyncing
  // every file of the data directory one by one, which dominated a small rewind.
  // --progress: its output says when it starts to change the target.
  const auto started = std::chrono::steady_clock::now();
  auto r = run("pg_rewind", {"--no-sync", "--progress", "-D", options_.dataDir, "--source-server=" + conninfo.value()},
               options_.rewindTimeout, clientEnv());
  if (!r.ok()) {
    // Failed before it changed anything (WAL it could not read, the source unreachable):
    // the directory is as it was, and the next try sees it so, not as a half-done rewind.
    if (!rewindChangedTarget(r.output)) clearMarker();
    return r;
  }
  const auto syncStarted = std::chrono::steady_clock::now();
  auto synced = syncFileSystems({options_.dataDir, options_.dataDir + "/pg_wal"});
  spdlog::info("pg: syncfs of the rewound data directory took {} ms",
               msSince(syncStarted));
  if (!synced) {
    r.exitCode = -1;
    r.output += "\n" + synced.error();
    return r;
  }
  spdlog::info("pg: pg_rewind and the sync of its file systems took {} ms",
               msSince(started));
  clearMarker();
  return r;
}

namespace {
// The text after `key` up to the end of its line, in pg_rewind's output.
std::string afterKey(const std::string& output, const std::string& key) {
  auto at = output.find(key);
  if (at == std::string::npos) return "";
  auto endl = output.find('\n', at);
  return output.substr(at + key.size(), endl == std::string::npos ? std::string::npos : endl - at - key.size());
}
}  // namespace

Divergence PgController::rewindIfDiverged(const PeerIdentity& source, std::string* detail,
                                                        std::string* discarded) {
  auto conninfo = peerConninfo(source, false);
  if (!conninfo) {
    *detail = conninfo.error();
    return Divergence::kUnknown;
  }
  const std::string queryConninfo = sourceQueryConninfo(conninfo.value());
  checkpointSource(source, queryConninfo);
  // The local WAL ends at the last (shutdown) checkpoint: what a rewind discards runs
  // from the fork to there.
  auto localEnd = controlValue("Latest checkpoint location:");
  auto r = rewind(source);
  *detail = oneLine(lastLines(r.output, 3));
  if (r.ok() && r.output.find("no rewind required") != std::string::npos) {
    if (r.output.find("same timeline") == std::string::npos) return Divergence::kCanFollow;
    return aheadOnSameTimeline(source, queryConninfo, detail);
  }
  if (!r.ok()) return Divergence::kUnknown;
  // "servers diverged at WAL location 0/3000060 on timeline 1"
  std::string fork = afterKey(r.output, "servers diverged at WAL location ");
  auto missing = firstMissingWalSegment(options_.dataDir);
  if (!missing || missing.value()) {
    // Its recovery could never reach the stream: not a standby, whatever is tried next.
    setMarker(std::string(kRewindMarker) + " without the WAL to recover");
    *detail = "rewound, but " +
              (missing ? "WAL segment " + *missing.value() + ", which its recovery reads, is missing: " + source.id +
                             " no longer had it"
                       : missing.error());
    return Divergence::kUnknown;
  }
  *discarded = "the WAL from " + (fork.empty() ? std::string("the fork") : fork) + " up to " +
               (localEnd ? localEnd.value() : std::string("its end")) + " (this data directory's last checkpoint)";
  return Divergence::kRewound;
}

Result<bool> PgController::basebackup(const PeerIdentity& source) {
  auto url = parsePgUrl(source.pgUrl);
  if (!url) return Error{"restore peer " + source.id + ": " + url.error()};
  return basebackupFrom(source.id, {"-h", url->host, "-p", std::to_string(url->port), "-U", options_.replicationUser});
}

Result<bool> PgController::basebackupFrom(const std::string& from, std::vector<std::string> connect) {
  std::error_code ec;
  bool keptOld = false;
  if (auto kept = keepAsideUnfinishedRewind(); !kept) return kept;
  if (isSetUp()) {
    // Keep the current data directory aside until the new one works.
    fs::remove_all(oldDataDir(), ec);
    fs::rename(options_.dataDir, oldDataDir(), ec);
    if (ec) return Error{"cannot move " + options_.dataDir + " aside: " + ec.message()};
    keptOld = true;
    spdlog::info("pg: moved the old data directory aside to {}", oldDataDir());
  }
  setMarker("basebackup");
  auto prep = prepareDataDir(/*wipe=*/true);
  if (!prep) return prep;
  std::vector<std::string> args = {"-D", options_.dataDir};
  args.insert(args.end(), connect.begin(), connect.end());
  for (const char* a : {"-X", "stream", "-c", "fast", "-w", "--label=dugong-rebuild"}) args.emplace_back(a);
  auto r = run("pg_basebackup", std::move(args), options_.basebackupTimeout, clientEnv());
  if (!r.ok()) {
    std::string err = "pg_basebackup from " + from + " " + r.describe() + ": " + oneLine(lastLines(r.output, 3));
    if (keptOld) {
      fs::remove_all(options_.dataDir, ec);
      fs::rename(oldDataDir(), options_.dataDir, ec);
      if (!ec) clearMarker();
    }
    return Error{err};
  }
  clearMarker();
  return true;
}

void PgController::discardOldDataDir() {
  std::error_code ec;
  if (fs::exists(oldDataDir(), ec)) {
    fs::remove_all(oldDataDir(), ec);
    spdlog::info("pg: removed the old data directory {}", oldDataDir());
  }
}

}  // namespace dugong::pg
