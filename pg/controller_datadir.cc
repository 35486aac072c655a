#include "pg/controller.h"
#include "pg/controller_support.h"
#include "pg/plan/hot_standby.h"
#include "pg/managed_conf.h"
#include "pg/settings_catalog.h"
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// ---------------------------------------------------------------- data directory

DataDirFound PgController::dataDirFound(std::string* error) const {
  // fs::exists answers false with no error only for a path that is not there; any other
  // failure (permissions, I/O, a file where a directory should be) is no answer.
  bool unreadable = false;
  auto there = [&](const std::string& path) {
    std::error_code ec;
    const bool yes = fs::exists(path, ec);
    if (ec && !unreadable) {
      unreadable = true;
      if (error) *error = path + ": " + ec.message();
    }
    return yes;
  };
  const bool version = there(options_.dataDir + "/PG_VERSION");
  const bool control = there(options_.dataDir + "/global/pg_control");
  const bool marker = there(markerPath());
  if (unreadable) return DataDirFound::kUnreadable;
  return version && control && !marker ? DataDirFound::kSetUp : DataDirFound::kMissing;
}

bool PgController::isSetUp() const { return dataDirFound() == DataDirFound::kSetUp; }

Result<bool> PgController::checkDataDirReadable() const {
  std::string error;
  if (dataDirFound(&error) != DataDirFound::kUnreadable) return true;
  return Error{"cannot tell whether the data directory " + options_.dataDir + " holds a database (" + error +
               "): nothing is changed until it can be read"};
}

Result<bool> PgController::keepAsideUnfinishedRewind() {
  std::error_code ec;
  const std::string marker = readFile(markerPath());
  if (marker.rfind(kRewindMarker, 0) != 0 || !fs::exists(options_.dataDir, ec)) return true;
  const std::string aside = options_.dataDir + ".dugong-kept-" + std::to_string(::time(nullptr));
  fs::rename(options_.dataDir, aside, ec);
  if (ec) return Error{"cannot move " + options_.dataDir + " (left by an unfinished pg_rewind) aside: " + ec.message()};
  clearMarker();
  spdlog::warn("pg: the data directory, left by a pg_rewind that did not finish ({}), is kept as {}: it holds this "
               "peer's own data; remove it once it is not needed",
               oneLine(marker), aside);
  return true;
}


bool PgController::isRunning() const { return lockFileHeldByLivePostmaster(options_.dataDir + "/postmaster.pid"); }

bool PgController::hasStandbySignal() const {
  std::error_code ec;
  return fs::exists(options_.dataDir + "/standby.signal", ec);
}

Result<bool> PgController::prepareDataDir(bool wipe) {
  std::error_code ec;
  if (wipe) fs::remove_all(options_.dataDir, ec);
  if (ec) return Error{"cannot remove " + options_.dataDir + ": " + ec.message()};
  fs::create_directories(options_.dataDir, ec);
  if (ec) return Error{"cannot create " + options_.dataDir + ": " + ec.message()};
  if (::chown(options_.dataDir.c_str(), uid_, gid_) != 0 || ::chmod(options_.dataDir.c_str(), 0700) != 0) {
    return Error{"cannot give " + options_.dataDir + " to " + options_.osUser + ": " + std::strerror(errno)};
  }
  const std::string sock = options_.socketPath();
  fs::create_directories(sock, ec);
  if (ec) return Error{"cannot create the socket directory " + sock + ": " + ec.message()};
  if (::chown(sock.c_str(), uid_, gid_) != 0 || ::chmod(sock.c_str(), 0700) != 0) {
    return Error{"cannot give the socket directory " + sock + " to " + options_.osUser + ": " + std::strerror(errno)};
  }
  std::string log = options_.logPath();
  if (!fs::exists(log, ec)) std::ofstream(log, std::ios::app).close();
  if (::chown(log.c_str(), uid_, gid_) != 0) {
    return Error{"cannot give the log file " + log + " to " + options_.osUser + ": " + std::strerror(errno)};
  }
  return true;
}

Result<bool> PgController::writeFileAsOwner(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".dugong-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Error{"cannot write " + tmp};
  }
  if (::chmod(tmp.c_str(), mode) != 0 || ::chown(tmp.c_str(), uid_, gid_) != 0) {
    return Error{"cannot set the owner of " + tmp + ": " + std::strerror(errno)};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error{"cannot rename " + tmp + ": " + std::strerror(errno)};
  return true;
}

Result<bool> PgController::writeConf(const ManagedState& state, FloorRead floor) {
  std::lock_guard lock(confMu_);
  return writeConfLocked(state, floor);
}

Result<bool> PgController::rewriteConfWithWritesMode() {
  std::lock_guard lock(confMu_);
  ManagedState last;
  {
    std::lock_guard stateLock(stateMu_);
    last = state_;
  }
  return writeConfLocked(last);
}

Result<bool> PgController::writeConfLocked(const ManagedState& wanted, FloorRead floor) {
  // A stop of writes noted before this write is in it, whoever writes: no apply, fence
  // or poll lifts it (pg/plan/writes.h).
  ManagedState state = wanted;
  if (state.role == "primary" && primaryUnderWrites().writesStopped) state.writesStopped = true;
  std::string confPath = options_.dataDir + "/postgresql.conf";
  std::string conf = readFile(confPath);
  if (conf.empty()) return Error{confPath + " is missing or empty"};
  if (conf.find(kIncludeLine) == std::string::npos) {
    if (!conf.empty() && conf.back() != '\n') conf += '\n';
    conf += std::string(kIncludeLine) + "\n";
    auto w = writeFileAsOwner(confPath, conf, 0600);
    if (!w) return w;
  }
  // postgresql.auto.conf is read last: make sure it does not override what we manage.
  std::string autoPath = options_.dataDir + "/postgresql.auto.conf";
  std::string autoConf = readFile(autoPath);
  if (!autoConf.empty()) {
    std::istringstream in(autoConf);
    std::string line, kept;
    bool dropped = false;
    while (std::getline(in, line)) {
      std::string key = line.substr(0, line.find_first_of(" =\t"));
      bool managed = false;
      for (const auto& m : managedSettingNames()) managed = managed || key == m;
      if (managed) {
        dropped = true;
        spdlog::warn("pg: dropping '{}' from postgresql.auto.conf: dugong manages it", key);
      } else {
        kept += line + "\n";
      }
    }
    if (dropped) {
      auto w = writeFileAsOwner(autoPath, kept, 0600);
      if (!w) return w;
    }
  }
  // A standby starts only with the hot-standby settings at least its primary's, which its
  // pg_control holds (replayed, or copied by pg_rewind and pg_basebackup): read before
  // every standby's file, so that no start (a rejoin's, a rebuild's, a restart's) is below.
  if (startsAtHotStandbyFloor(state.role) && floor == FloorRead::kRead) refreshHotStandbyFloor();
  auto w = writeFileAsOwner(options_.dataDir + "/" + kManagedConfName,
                            renderManagedConf(effectiveOptions(state.role), state), 0600);
  if (!w) return w;
  std::lock_guard lock(stateMu_);
  state_ = state;
  return true;
}

PgOptions PgController::effectiveOptions(const std::string& role) const {
  std::lock_guard lock(clusterMu_);
  PgOptions out = withClusterConfig(options_, cluster_);
  const auto defaults = defaultSettings(out);
  out.settings = hotStandbyStartSettings(role, std::move(out.settings), hotStandbyFloor_, defaults);
  return out;
}

void PgController::refreshHotStandbyFloor() {
  std::map<std::string, long> floor;
  auto ctl = run("pg_controldata", {"-D", options_.dataDir}, 30s);
  if (ctl.ok()) floor = hotStandbyValuesFromControlData(ctl.output);
  std::lock_guard lock(clusterMu_);
  hotStandbyFloor_ = std::move(floor);
}

Result<bool> PgController::restartInPlace() {
  std::lock_guard applyLock(applyMu_);
  if (!isRunning()) return Error{"postgres is not running; its agent starts it when its role needs it"};
  ManagedState state;
  {
    std::lock_guard lock(stateMu_);
    state = state_;
  }
  // A primary whose writes are shut down (its lease ended, it withdrew) stays down; one
  // shut down during the restart is signalled as it starts, as during a primary's apply,
  // and stopped again after (safety review of 2f035ac, item 6).
  const bool primary = state.role == "primary";
  if (primary && !primaryUnderWrites().run) {
    return Error{"writes are shut down on this primary (its lease ended, or it withdrew from ZooKeeper): it is not "
                 "restarted; it starts again once its agent resumes writes"};
  }
  spdlog::info("pg: restarting postgres as requested by an operator (role {})", state.role);
  const FlagInFlight inFlight{primaryApplyInFlight_, primary};
  if (auto w = writeConf(state); !w) return w;
  if (auto s = stop(); !s) return s;
  auto started = start();
  if (primary && !primaryUnderWrites().run) {
    auto s = stop(StopMode::kImmediate);
    return Error{"writes were shut down during the restart: postgres is stopped again" +
                 (s ? std::string() : " (the stop failed: " + s.error() + ")")};
  }
  return started;
}

Result<bool> PgController::reloadNow() {
  std::lock_guard applyLock(applyMu_);
  if (!isRunning()) return Error{"postgres is not running"};
  spdlog::info("pg: reloading postgres' configuration as requested by an operator");
  return reload();
}

Result<ClusterConfigApplied> PgController::applyClusterConfig(const ClusterConfig& config) {
  // Every value as postgres checks it at its start (pg/settings_catalog.h): a version it
  // refuses never reaches dugong.conf, and the one applied before stays in effect. Only
  // when the settings changed: the check forks postgres, and this worker also promotes.
  bool sameSettings = false;
  {
    std::lock_guard lock(clusterMu_);
    sameSettings = cluster_.settings == config.settings;
  }
  if (!sameSettings) {
    if (auto ok = checkWithPostgres(config.settings, options_.binDir, options_.osUser); !ok) {
      return Error{ok.error() + "; the configuration applied before stays in effect"};
    }
  }
  // Like every writer of dugong.conf: never between another's read of the state and its write.
  std::lock_guard applyLock(applyMu_);
  ClusterConfig previous;
  {
    std::lock_guard lock(clusterMu_);
    previous = std::exchange(cluster_, config);
  }
  if (auto kept = keepClusterConfig(config); !kept) {
    spdlog::warn("pg: the cluster configuration is applied but not kept in {} ({}): a start before ZooKeeper gives "
                 "it again runs without it",
                 clusterConfigPath(), kept.error());
  }
  ClusterConfigApplied out;
  out.changed = changedSettings(withClusterConfig(options_, previous).settings,
                                withClusterConfig(options_, config).settings);
  out.hbaChanged = previous.hba != config.hba;
  ManagedState state;
  {
    std::lock_guard lock(stateMu_);
    state = state_;
  }
  if (!isSetUp() || !fs::exists(options_.dataDir + "/" + kManagedConfName)) {
    spdlog::info("pg: cluster configuration recorded; no data directory yet, so it is written at its setup");
    return out;
  }
  // Never a file for another role than the running postgres was given: the state is the
  // one recorded in the file (read at construction, kept by every write since).
  if (auto recorded = parseManagedConf(readFile(options_.dataDir + "/" + kManagedConfName)); !recorded) {
    return Error{recorded.error() + "; the files are written at the next role change"};
  }
  if (auto w = writeConf(state); !w) return Error{w.error()};
  if (auto w = writeHba(); !w) return Error{w.error()};
  if (!isRunning()) return out;
  if (auto r = reload(); !r) return Error{r.error()};
  out.reloaded = true;
  return out;
}

Result<bool> PgController::writeHba() {
  // trust only on the Unix socket (a 0700 directory: root and osUser), and over TCP
  // only where the configuration allows it explicitly (allowTrust).
  const char* scram = "scram-sha-256";
  std::optional<std::string> superMethod = options_.superuserPassword ? std::optional<std::string>(scram)
                                           : options_.allowTrust      ? std::optional<std::string>("trust")
                                                                      : std::nullopt;
  std::string method = options_.replicationPassword ? scram : "trust";  // validate(): trust needs allowTrust
  std::ostringstream out;
  out << "# Written by dugong from its configuration. Do not edit; use postgres.hba or the cluster configuration "
         "(dugong-adm config).\n";
  out << "local all " << options_.superuser << " trust\n";
  // TCP: hostssl (TLS or nothing) when the configuration says so.
  const std::string tcp = hbaTcpType(options_.tls);
  if (superMethod) {
    out << tcp << " all " << options_.superuser << " 127.0.0.1/32 " << *superMethod << "\n";
    out << tcp << " all " << options_.superuser << " ::1/128 " << *superMethod << "\n";
  }
  out << tcp << " replication " << options_.replicationUser << " " << options_.replicationCidr << " " << method << "\n";
  out << tcp << " postgres " << options_.replicationUser << " " << options_.replicationCidr << " " << method << "\n";
  for (const auto& l : effectiveOptions("none").extraHbaLines) out << l << "\n";
  return writeFileAsOwner(options_.dataDir + "/pg_hba.conf", out.str(), 0600);
}

Result<bool> PgController::keepClusterConfig(const ClusterConfig& config) const {
  const std::string path = clusterConfigPath();
  const std::string tmp = path + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << config.serialize();
    out.flush();
    if (!out) return Error{"cannot write " + tmp};
  }
  std::error_code ec;
  fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, ec);
  fs::rename(tmp, path, ec);
  if (ec) return Error{"cannot rename " + tmp + ": " + ec.message()};
  return true;
}

void PgController::setMarker(const std::string& what) {
  std::ofstream(markerPath(), std::ios::trunc) << what << "\n";
}

void PgController::clearMarker() {
  std::error_code ec;
  fs::remove(markerPath(), ec);
}

}  // namespace dugong::pg
