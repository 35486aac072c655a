#include "pg/controller.h"
#include "pg/controller_support.h"
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// ---------------------------------------------------------------- programs

CommandResult PgController::run(const std::string& tool, std::vector<std::string> args,
                                std::chrono::milliseconds timeout, std::map<std::string, std::string> env) {
  CommandSpec spec;
  spec.argv.push_back(options_.binDir + "/" + tool);
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.runAsUser = options_.osUser;
  spec.env = std::move(env);
  spec.timeout = timeout;
  spdlog::info("pg: running {}", describeArgv(spec.argv));
  CommandResult r = runCommand(spec);
  logOutput(tool, r);
  return r;
}

std::string PgController::logTail() const { return lastLines(readFile(options_.logPath()), 6); }

Result<bool> PgController::initdb() {
  if (auto kept = keepAsideUnfinishedRewind(); !kept) return kept;
  setMarker("initdb");
  auto prep = prepareDataDir(/*wipe=*/true);
  if (!prep) return prep;
  auto r = run("initdb",
               {"-D", options_.dataDir, "-U", options_.superuser, "--data-checksums", "--auth=trust", "-E", "UTF8",
                "--locale=C.UTF-8", "--no-instructions"},
               options_.initdbTimeout);
  if (!r.ok()) return Error{"initdb " + r.describe() + ": " + oneLine(lastLines(r.output, 4))};
  auto hba = writeHba();
  if (!hba) return hba;
  return true;
}

void PgController::removeStaleLockFiles() {
  // Lock files left by a postmaster that died (e.g. killed): postgres would take a
  // zombie, one whose parent does not reap it, for a running server and refuse to start.
  for (const std::string& lockFile : {options_.dataDir + "/postmaster.pid",
                                      options_.socketPath() + "/.s.PGSQL." + std::to_string(options_.port) + ".lock"}) {
    std::error_code ec;
    if (fs::exists(lockFile, ec) && !lockFileHeldByLivePostmaster(lockFile)) {
      spdlog::warn("pg: removing the stale {}", lockFile);
      fs::remove(lockFile, ec);
    }
  }
}

bool PgController::killedBackendsHoldMemory(const std::string& output) {
  // The backends of a killed postmaster may still hold its shared memory for a moment.
  if (output.find("pre-existing shared memory block") == std::string::npos) return false;
  std::this_thread::sleep_for(1s);
  return true;
}

Result<bool> PgController::start() {
  auto prep = prepareDataDir(/*wipe=*/false);
  if (!prep) return prep;
  auto hba = writeHba();
  if (!hba) return hba;
  auto free = portFree(options_.localHost(), options_.port);
  if (!free) return free;
  removeStaleLockFiles();
  auto deadline = std::chrono::steady_clock::now() + options_.startTimeout;
  std::string lastError;
  // A stop or a shutdown of writes signals the postmaster that this start spawns.
  const FlagInFlight inFlight{startInFlight_};
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 1) break;
    auto r = run("pg_ctl", {"start", "-D", options_.dataDir, "-l", options_.logPath(), "-w", "-t",
                            std::to_string(left.count())},
                 left + 10s);
    if (r.ok()) return true;
    std::string tail = logTail();
    lastError = "pg_ctl start " + r.describe() + ": " + oneLine(lastLines(r.output, 2)) + " | log: " + oneLine(tail);
    if (!killedBackendsHoldMemory(tail)) break;
  }
  return Error{lastError};
}

Result<bool> PgController::stop(StopMode mode) {
  if (!isRunning()) return true;
  // A stopped postmaster acts on none of pg_ctl's signals, while its backends go on
  // serving (and a primary's, committing).
  if (auto pid = livePostmasterPid(options_.dataDir); pid && processStopped(*pid)) {
    return killPostmasterGroup(*pid, "it is stopped (SIGSTOP or a debugger) and acts on no other signal");
  }
  CommandResult r;
  if (mode == StopMode::kFast) {
    r = run("pg_ctl", {"stop", "-D", options_.dataDir, "-m", "fast", "-w", "-t",
                       std::to_string(options_.stopTimeout.count())},
            options_.stopTimeout + 10s);
    if (r.ok() || !isRunning()) return true;
    spdlog::warn("pg: fast shutdown did not finish in {} s, stopping immediately", options_.stopTimeout.count());
  }
  r = run("pg_ctl", {"stop", "-D", options_.dataDir, "-m", "immediate", "-w", "-t", "30"}, 40s);
  if (r.ok() || !isRunning()) return true;
  if (auto pid = livePostmasterPid(options_.dataDir)) {
    return killPostmasterGroup(*pid, "it did not stop on pg_ctl stop -m immediate (" + oneLine(r.output) + ")");
  }
  return true;
}

// pg_ctl starts the postmaster as the leader of a session of its own: every backend and
// auxiliary process is in its process group. SIGKILL to the group ends them all, stopped
// or not; the next start runs crash recovery.
Result<bool> PgController::killPostmasterGroup(pid_t pid, const std::string& why) {
  const pid_t group = ::getpgid(pid);
  const bool ownGroup = group == pid;
  spdlog::error("pg: killing the postmaster (pid {}){} with SIGKILL: {}", pid,
                ownGroup ? " and every process of its group" : "", why);
  if (::kill(ownGroup ? -pid : pid, SIGKILL) != 0 && errno != ESRCH) {
    return Error{"could not stop postgres: kill(SIGKILL) of pid " + std::to_string(pid) + ": " + std::strerror(errno)};
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (isRunning() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  if (isRunning()) return Error{"could not stop postgres: pid " + std::to_string(pid) + " outlived SIGKILL for 10 s"};
  return true;
}

Result<bool> PgController::reload() {
  // Through the local socket first: no program to start (a pg_ctl costs 100-200 ms on a
  // loaded host, on the path of every failover); pg_ctl when postgres does not answer.
  if (localQuery("SELECT pg_reload_conf()")) return true;
  auto r = run("pg_ctl", {"reload", "-D", options_.dataDir}, 30s);
  if (!r.ok()) return Error{"pg_ctl reload " + r.describe() + ": " + oneLine(r.output)};
  return true;
}

// After a reload, waits (bounded) until new sessions see the settings of `state`.
// A stop of writes noted meanwhile is what new sessions must see (it is folded into every
// configuration written since).
Result<bool> PgController::waitSettings(const ManagedState& state) {
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    const bool stopped = state.role == "primary" && primaryUnderWrites().writesStopped;
    const std::string wantRo = state.readOnlyInEffect() || stopped ? "on" : "off";
    auto q = localQuery("SELECT current_setting('default_transaction_read_only'), "
                        "current_setting('synchronous_standby_names')");
    if (q && !q->rows.empty() && q->rows[0][0] == wantRo) return true;
    last = q ? "default_transaction_read_only is still " + q->rows[0][0].value_or("?") : q.error();
    // Every 10 ms: a promotion and a primary's opening of writes wait on this.
    std::this_thread::sleep_for(10ms);
  }
  return Error{"the new settings did not take effect: " + last};
}

Result<bool> PgController::promote() {
  // Asked without waiting, then watched closely: pg_promote(true) looks only every
  // 100 ms, and the promotion is on the path of every failover.
  auto q = localQuery("SELECT pg_promote(false)");
  if (!q) return Error{"pg_promote: " + q.error()};
  if (q->rows.empty() || q->rows[0][0] != "t") return Error{"pg_promote refused the promotion"};
  const auto deadline = std::chrono::steady_clock::now() + options_.promoteTimeout;
  std::string last = "still in recovery";
  while (std::chrono::steady_clock::now() < deadline) {
    auto rec = localQuery("SELECT pg_is_in_recovery()");
    if (rec && rec->rows[0][0] == "f") {
      spdlog::info("pg: promoted to primary");
      return true;
    }
    last = rec ? "still in recovery" : rec.error();
    std::this_thread::sleep_for(20ms);
  }
  return Error{"the promotion did not finish within " + std::to_string(options_.promoteTimeout.count()) + " s (" +
               last + ")"};
}

Result<bool> PgController::bootstrapRoles() {
  const std::string& user = options_.replicationUser;
  // A brand-new primary is read-only and has no sync yet: this one transaction is
  // read-write and does not wait for a sync.
  std::string sql = "BEGIN TRANSACTION READ WRITE; SET LOCAL synchronous_commit = local; ";
  sql += "DO $dugong$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = " + quoteLiteral(user) +
         ") THEN CREATE ROLE " + quoteIdent(user) + " WITH REPLICATION LOGIN; END IF; END $dugong$; ";
  // Passwords travel as SCRAM verifiers made here: the server never sees them, so
  // they cannot end up in its log (a failed statement is logged with its text).
  std::vector<std::pair<std::string, std::string>> passwords;
  if (options_.replicationPassword) passwords.emplace_back(user, *options_.replicationPassword);
  if (options_.superuserPassword) passwords.emplace_back(options_.superuser, *options_.superuserPassword);
  for (const auto& [role, password] : passwords) {
    auto verifier = encryptPassword(localConninfo(), role, password, options_.queryTimeout);
    if (!verifier) return Error{"setting the password of " + role + ": " + verifier.error()};
    sql += "ALTER ROLE " + quoteIdent(role) + " WITH PASSWORD " + quoteLiteral(verifier.value()) + "; ";
  }
  // What pg_rewind needs from its source, so that it can use the replication role.
  for (const char* fn : {"pg_catalog.pg_ls_dir(text, boolean, boolean)", "pg_catalog.pg_stat_file(text, boolean)",
                         "pg_catalog.pg_read_binary_file(text)",
                         "pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)"}) {
    sql += std::string("GRANT EXECUTE ON FUNCTION ") + fn + " TO " + quoteIdent(user) + "; ";
  }
  // pg_rewind reads the source's pg_control, which shows a new timeline only after a
  // checkpoint: the rewinding peer asks for one.
  sql += "GRANT pg_checkpoint TO " + quoteIdent(user) + "; COMMIT;";
  auto q = localQuery(sql);
  if (!q) return Error{"creating the replication role: " + q.error()};
  return true;
}

// ---------------------------------------------------------------- connections

std::string PgController::localConninfo() const {
  // The Unix socket: trusted there, so the adapter needs no password, also before the
  // bootstrap has set one.
  return buildConninfo({{"host", options_.socketPath()},
                        {"port", std::to_string(options_.port)},
                        {"user", options_.superuser},
                        {"dbname", "postgres"},
                        {"application_name", kAgentApplicationName}});
}

Result<std::string> PgController::peerConninfo(const PeerIdentity& peer, bool forReplication) const {
  auto url = parsePgUrl(peer.pgUrl);
  if (!url) return Error{"peer " + peer.id + ": " + url.error()};
  std::map<std::string, std::string> p = {{"host", url->host},
                                          {"port", std::to_string(url->port)},
                                          {"user", options_.replicationUser},
                                          {"application_name", options_.peerId},
                                          {"connect_timeout", "5"},
                                          {"keepalives_idle", "5"},
                                          {"keepalives_interval", "2"},
                                          {"keepalives_count", "3"}};
  if (!forReplication) {
    p["dbname"] = "postgres";
    // pg_rewind lists the source's files with one recursive query whose row estimate
    // (millions) makes postgres JIT-compile it: 250-350 ms of a 20 ms query, in every
    // rewind and dry run. Nothing dugong or pg_rewind asks over this connection gains
    // from JIT.
    p["options"] = "-c jit=off";
  }
  if (forReplication && options_.replicationPassword) p["password"] = *options_.replicationPassword;
  // TLS as configured: replication (primary_conninfo), pg_basebackup, pg_rewind and the
  // queries to the peer all connect with it.
  p.merge(clientTlsParams(options_.tls));
  return buildConninfo(p);
}

std::map<std::string, std::string> PgController::clientEnv() const {
  // libpq's environment variables: the password never on a command line, and TLS as
  // peerConninfo sets it for pg_basebackup, which takes no connection string here.
  std::map<std::string, std::string> env;
  if (options_.replicationPassword) env["PGPASSWORD"] = *options_.replicationPassword;
  const std::map<std::string, std::string> names = {
      {"sslmode", "PGSSLMODE"}, {"sslrootcert", "PGSSLROOTCERT"}, {"sslcert", "PGSSLCERT"}, {"sslkey", "PGSSLKEY"}};
  for (const auto& [key, value] : clientTlsParams(options_.tls)) env[names.at(key)] = value;
  return env;
}

Result<QueryResult> PgController::localQuery(const std::string& sql) const {
  return localPool_.query(sql);
}

}  // namespace dugong::pg
