// rebuild: run on a deposed (or stopped, broken) peer. Rebuilds its postgres from the
// current primary -- pg_rewind when that is safe, otherwise pg_basebackup, as the
// postgres adapter decides -- starts it as a standby of the primary, then removes the
// peer from `deposed` so that its agent rejoins and the primary appends it as an async.
// With --full it always copies (tools/adm/rebuild_full.h).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "agent/config.h"
#include "statemachine/rejoin_policy.h"
#include "ops/http_client.h"
#include "agent/instance_lock.h"
#include "pg/command.h"
#include "pg/controller.h"
#include "pg/options.h"
#include "tools/adm/commands.h"
#include "tools/adm/rebuild_full.h"
#include "tools/adm/rebuild_progress.h"
#include "ops/switchover_plan.h"

namespace dugong::adm {
namespace {

struct RebuildArgs {
  std::string config;
  bool yes = false;
  bool discardData = false;
  bool full = false;
  int waitSeconds = 120;
  int agentWaitSeconds = 60;
};

bool pollUntil(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) {
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return true;
}

// A deposed peer's agent stops postgres once it learns it is deposed; a rebuild that
// starts meanwhile meets "the database system is shutting down". Done when the agent
// says it is deposed with no transition in flight and postgres is stopped (or, without
// its HTTP status, when no postmaster runs any more), or when it is no longer deposed.
bool deposedAgentSettled(const agent::AgentConfig& config, const pg::PgController& controller) {
  if (controller.postmasterRunning()) return false;
  if (config.httpHost.empty()) return true;
  const std::string host = config.httpHost == "0.0.0.0" ? "127.0.0.1" : config.httpHost;
  auto r = agent::httpGet("http://" + host + ":" + std::to_string(config.httpPort) + "/state");
  if (!r || r->status != 200) return true;  // it stopped meanwhile
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return false;
  const auto health = j.value("health", nlohmann::json::object());
  return !health.value("transitionInFlight", false);
}

std::string roleOf(const ClusterState& s, const std::string& id) {
  const std::string role = roleInState(s, id);
  return role.empty() ? "unassigned" : role;
}

// The database system identifier of the data directory `dir`, as pg_controldata prints
// it (it reads pg_control only: no recovery is run, a running postgres is fine); "" when
// it cannot be read.
std::string systemIdentifier(const pg::PgOptions& options, const std::string& dir) {
  pg::CommandSpec spec;
  spec.argv = {options.binDir + "/pg_controldata", "-D", dir};
  if (::geteuid() == 0) spec.runAsUser = options.osUser;
  spec.timeout = std::chrono::seconds(30);
  const pg::CommandResult r = pg::runCommand(spec);
  if (!r.ok()) return "";
  const std::string key = "Database system identifier:";
  const auto at = r.output.find(key);
  if (at == std::string::npos) return "";
  const auto begin = r.output.find_first_not_of(" \t", at + key.size());
  const auto end = r.output.find('\n', at);
  if (begin == std::string::npos || begin >= end) return "";
  return r.output.substr(begin, end - begin);
}

// --full: stops postgres, reads what the data directory holds, and moves it aside, so
// that the rebuild copies into an empty place.
Result<bool> setAside(pg::PgController& controller, const pg::PgOptions& options, OldDataDir* old) {
  if (controller.postmasterRunning()) {
    auto stopped = controller.apply(PgConfig::none());
    if (!stopped.ok) return Error{"cannot stop postgres: " + stopped.error};
  }
  std::error_code ec;
  old->setUp = std::filesystem::exists(options.dataDir + "/global/pg_control", ec);
  old->standby = std::filesystem::exists(options.dataDir + "/standby.signal", ec);
  old->marked = std::filesystem::exists(incompleteMarkerPath(options.dataDir), ec);
  if (old->setUp) old->systemId = systemIdentifier(options, options.dataDir);
  auto moved = moveAside(options.dataDir);
  if (!moved) return moved;
  if (*moved) spdlog::info("moved the old data directory aside to {}", setAsidePath(options.dataDir));
  return true;
}

int runRebuild(const CommonOptions& common, const RebuildArgs& a) {
  auto config = agent::loadConfig(a.config);
  if (!config) return fail(kExitUsage, config.error());
  pg::PgOptions pgOptions = config->pg;
  pgOptions.replaceUnknownData = a.discardData;
  if (auto v = pg::validate(config->pg); !v) return fail(kExitUsage, a.config + ": postgres: " + v.error());
  const std::string self = config->identity.id;
  if (a.waitSeconds < 0) return fail(kExitUsage, "--wait must not be negative");

  auto client = connectZk(config->zk, std::chrono::seconds(common.timeoutSeconds));
  if (!client) return fail(kExitUnavailable, client.error());
  auto st = readClusterState(**client);
  if (!st) return fail(kExitUnavailable, st.error());
  auto active = (*client)->activePeers();
  if (!active) return fail(kExitUnavailable, "listing the active peers: " + active.error());
  const ClusterState& s = st->state;
  const std::string role = roleOf(s, self);
  // The agent runs on this host while it holds its instance lock (its election node may
  // outlive it: a stopped agent keeps its session for a restart). Held here once free,
  // so that the agent cannot start in the middle of the rebuild.
  auto lock = agent::InstanceLock::acquire(config->instanceLockPath());
  if (!lock && !agent::InstanceLock::heldByAnother(lock.error())) return fail(kExitFailed, lock.error());
  bool running = !lock;
  if (role == "primary" || role == "sync") {
    return fail(kExitFailed, self + " is the " + role + " of generation " + std::to_string(s.generation) +
                                 ": it is never rebuilt (that could lose acknowledged writes)");
  }
  if (s.oneNodeWriteMode) return fail(kExitFailed, "the cluster is in one-node-write mode: there is no sync to protect "
                                                   "and no rebuild to do; let the primary add this peer");
  const auto agentDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.agentWaitSeconds);
  if (role != "deposed" && running) {
    std::cout << self << " is " << role << " and its agent runs: waiting up to " << a.agentWaitSeconds
              << " s for it to exit (stop it first: systemctl stop dugong)\n"
              << std::flush;
    if (!pollUntil(agentDeadline, [&] { return (lock = agent::InstanceLock::acquire(config->instanceLockPath())).ok(); })) {
      return fail(kExitFailed, self + " is " + role + " and its agent still runs after " +
                                   std::to_string(a.agentWaitSeconds) +
                                   " s: it is not deposed. To rebuild a broken peer, stop its agent first");
    }
    running = false;
    std::cout << self << "'s agent has exited\n";
  }
  pg::PgController controller(pgOptions);
  // The cluster's replica methods (backup.replica-methods): a restore from the repository first.
  if (auto node = (*client)->readConfig(); node && node->exists) {
    if (auto cluster = pg::ClusterConfig::parse(node->data)) controller.noteBackupSection(cluster->backup);
  }
  if (role == "deposed" && running && !deposedAgentSettled(*config, controller)) {
    std::cout << self << "'s agent is stopping postgres (it has learnt it is deposed): waiting up to "
              << a.agentWaitSeconds << " s for it\n"
              << std::flush;
    if (!pollUntil(agentDeadline, [&] { return deposedAgentSettled(*config, controller); })) {
      return fail(kExitFailed, self + "'s agent has not stopped postgres within " + std::to_string(a.agentWaitSeconds) +
                                   " s; look at its log, or stop the agent and run rebuild again");
    }
    auto now = readClusterState(**client);
    if (now && !containsPeer(now->state.deposed, self)) {
      std::cout << self << " is no longer deposed (its agent rejoined it): nothing to rebuild\n";
      return kExitOk;
    }
  }
  if (!containsPeer(*active, s.primary.id)) {
    return fail(kExitFailed, "the primary " + s.primary.id + " is not in ZooKeeper: nothing to rebuild from now");
  }

  std::cout << "peer " << self << " (" << role << ") will be rebuilt from the primary " << s.primary.id << " ("
            << s.primary.pgUrl << ") into " << config->pg.dataDir
            << (a.full ? " by a fresh copy (--full); the old data directory waits at " +
                             setAsidePath(config->pg.dataDir) + " until the copy runs"
                       : "")
            << "\n"
            << std::flush;
  if (!a.yes && !confirm(a.full ? "Replace " + config->pg.dataDir + " by a fresh copy of the primary's?"
                                : "Discard whatever in " + config->pg.dataDir + " is not on the primary and rebuild it?",
                         "-y")) {
    return fail(kExitFailed, "not rebuilt");
  }

  auto logger = spdlog::stderr_color_mt("rebuild");
  logger->set_pattern("%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::info("rebuilding {} from {}", self, s.primary.id);
  const auto started = std::chrono::steady_clock::now();
  auto before = controller.init();
  spdlog::info("local postgres: {}, data directory {}", before.online ? "running" : "stopped",
               before.setUp ? "set up" : "not set up");
  OldDataDir old;
  if (a.full) {
    auto aside = setAside(controller, config->pg, &old);
    if (!aside) return fail(kExitFailed, "not rebuilt: " + aside.error());
  }
  PgConfigApplied applied;
  {
    RebuildProgress progress(std::cout, ::isatty(STDOUT_FILENO) == 1);
    applied = controller.apply(PgConfig::standby(PgRole::kAsync, s.primary, s.primary));
  }
  if (!applied.ok && a.full) {
    if (controller.postmasterRunning()) (void)controller.apply(PgConfig::none());
    auto back = putBack(config->pg.dataDir, old.marked);
    return fail(kExitFailed, "rebuild --full failed: " + applied.error + "; " +
                                 (back ? std::string("the old data directory is back in place") : back.error()) +
                                 "; " + self + " stays " + role);
  }
  if (a.full && old.setUp) {
    std::string why;
    if (removeAfterCopy(old, systemIdentifier(config->pg, config->pg.dataDir), a.discardData, &why)) {
      auto removed = removeSetAside(config->pg.dataDir);
      std::cout << (removed ? "removed the old data directory " + setAsidePath(config->pg.dataDir) : removed.error())
                << "\n";
    } else {
      std::cout << "kept the old data directory at " << setAsidePath(config->pg.dataDir) << ": " << why
                << "; remove it once nothing in it is needed (rebuild --full --discard-data would have removed it)\n";
    }
  }
  if (!applied.ok) {
    // A deposed peer's postgres stays stopped (its agent expects it so, and the next
    // rebuild waits until it is): one this rebuild started and left behind is stopped.
    if (role == "deposed" && controller.postmasterRunning()) {
      auto stopped = controller.apply(PgConfig::none());
      spdlog::info("stopping the postgres this rebuild started: {}", stopped.ok ? "stopped" : stopped.error);
    }
    return fail(kExitFailed, "rebuild failed: " + applied.error + "; " + self + " stays " + role);
  }
  auto status = controller.status();
  spdlog::info("postgres runs as a standby of {} ({}), after {:.1f} s", s.primary.id,
               status.walReceiverStatus.value_or("no WAL receiver yet"),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());

  if (role == "deposed") {
    auto r = updateState(
        **client,
        [&](ClusterState& now) -> Result<bool> {
          auto released = releaseFromDeposed(now, self, s.primary.id);
          if (!released) return Error{released.error() + " during the rebuild; run rebuild again"};
          return released;
        },
        operatorReason("rebuild " + self));
    if (!r) return fail(kExitFailed, "rebuilt, but removing " + self + " from deposed failed: " + r.error());
    std::cout << self << " removed from deposed\n";
  }

  if (!running) {
    std::cout << "rebuilt. " << self << "'s agent is not running: start it, and the primary adds it as an async\n";
    return kExitOk;
  }
  // Its agent runs: wait for the primary to append it to the async chain.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.waitSeconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto now = readClusterState(**client);
    if (now && containsPeer(now->state.async, self)) {
      std::cout << "rebuilt: " << self << " is async[" << indexOfPeer(now->state.async, self) << "] of generation "
                << now->state.generation << "\n";
      return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (a.waitSeconds > 0) {
    return fail(kExitFailed, "rebuilt, but " + self + " was not added as an async within " +
                                 std::to_string(a.waitSeconds) + " s; check its agent's log and `dugong-adm show`");
  }
  std::cout << "rebuilt\n";
  return kExitOk;
}

}  // namespace

void addRebuildCommand(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto a = std::make_shared<RebuildArgs>();
  auto* sub = app.add_subcommand(
      "rebuild",
      "run on a deposed peer (or a broken one whose agent is stopped): rebuild its postgres from the primary "
      "(pg_rewind when safe, else pg_basebackup), then remove it from deposed so it rejoins as an async. "
      "ZooKeeper and postgres come from the agent's configuration file");
  sub->add_flag("--discard-data", a->discardData,
                "also replace a data directory that holds another database system (a different system "
                "identifier) or WAL the primary does not have; the agent refuses to, without this command");
  sub->add_flag("--full", a->full,
                "a fresh copy from the primary (pg_basebackup, or the cluster's replica methods) even where the "
                "data directory could follow as it is or after pg_rewind (Patroni's reinit). The old directory "
                "waits beside it (<dataDir>.before-full-rebuild, so the disk needs room for both) and is put back "
                "if the copy fails; afterwards it is removed, unless it last ran as a primary or held another "
                "system (then kept, and named) and --discard-data is not given");
  sub->add_option("--config", a->config, "the agent's YAML configuration (dugong.yaml)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_flag("-y,--yes", a->yes, "do not ask for confirmation");
  sub->add_option("--wait", a->waitSeconds, "seconds to wait for the peer to become an async (0: do not wait)")
      ->capture_default_str();
  sub->add_option("--agent-wait", a->agentWaitSeconds,
                  "seconds to wait for the peer's agent: to exit (a peer that is not deposed), or to stop postgres "
                  "(a deposed peer)")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  out.push_back({sub, [&common, a] { return runRebuild(common, *a); }, false});
}

}  // namespace dugong::adm
