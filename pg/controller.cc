#include "pg/controller.h"
#include "pg/hot_standby.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "pg/replication_slots.h"
#include "pg/rewound_wal.h"
#include "pg/wal_dir.h"
#include "pg/standby_names.h"

namespace dugong::pg {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Output of a command, indented, for the log.
void logOutput(const std::string& what, const CommandResult& r) {
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (r.ok()) {
    spdlog::info("pg: {} finished in {} ms{}{}", what, r.elapsed.count(), out.empty() ? "" : ":\n", out);
  } else {
    spdlog::warn("pg: {} failed ({}) after {} ms{}{}", what, r.describe(), r.elapsed.count(), out.empty() ? "" : ":\n",
                 out);
  }
}

std::string lastLines(const std::string& text, int n) {
  size_t pos = text.size();
  int lines = 0;
  while (pos > 0 && lines <= n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    ++lines;
  }
  return text.substr(pos + 1);
}

// The whole line of `text` around the last occurrence of `what`, if any.
std::optional<std::string> lineWith(const std::string& text, const std::string& what) {
  const auto at = text.rfind(what);
  if (at == std::string::npos) return std::nullopt;
  auto begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  const auto end = text.find('\n', at);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The line of a standby's server log tail that says why it cannot follow its upstream.
std::optional<std::string> cannotFollowEvidence(const std::string& logTail) {
  for (const char* what : {"forked off current database system timeline", "is not in this server's history",
                           "has already been removed", "is not a child of this server's history"}) {
    if (auto line = lineWith(logTail, what)) return line;
  }
  return std::nullopt;
}

// Milliseconds since `start`, for the log.
long long msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

std::string oneLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

Result<bool> portFree(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return true;  // not IPv4: let postgres tell
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err == EADDRINUSE) {
    return Error{"port " + std::to_string(port) + " on " + host + " is already in use by another program"};
  }
  return true;
}

}  // namespace

PgController::PgController(PgOptions options) : options_(std::move(options)) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(options_.osUser.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    uid_ = pw.pw_uid;
    gid_ = pw.pw_gid;
  }
  auto parsed = parseManagedConf(readFile(options_.dataDir + "/" + kManagedConfName));
  if (parsed.ok()) state_ = parsed.value();
}

// ---------------------------------------------------------------- data directory

bool PgController::isSetUp() const {
  std::error_code ec;
  return fs::exists(options_.dataDir + "/PG_VERSION", ec) && fs::exists(options_.dataDir + "/global/pg_control", ec) &&
         !fs::exists(markerPath(), ec);
}

namespace {

// Whether the first line of a postgres lock file (postmaster.pid, or the socket's
// .s.PGSQL.<port>.lock) names a live postmaster. The pid may have been reused: check that
// it is a postgres process, and not a zombie (a killed postmaster whose parent has not
// reaped it yet, which postgres itself would take for a running server).
bool lockFileHeldByLivePostmaster(const std::string& lockFile) {
  std::ifstream in(lockFile);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') return false;
  return stat.find("(postgres)") != std::string::npos;
}

}  // namespace

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

Result<bool> PgController::writeConf(const ManagedState& state) {
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
  auto w = writeFileAsOwner(options_.dataDir + "/" + kManagedConfName,
                            renderManagedConf(effectiveOptions(state.role), state), 0600);
  if (!w) return w;
  std::lock_guard lock(stateMu_);
  state_ = state;
  return true;
}

PgOptions PgController::effectiveOptions(const std::string& role) const {
  const bool standby = role == "sync" || role == "async";
  std::lock_guard lock(clusterMu_);
  PgOptions out = withClusterConfig(options_, cluster_);
  if (standby) out.settings = raiseToFloor(out.settings, hotStandbyFloor_, defaultSettings(out));
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
  if (state.role == "sync" || state.role == "async") refreshHotStandbyFloor();
  spdlog::info("pg: restarting postgres as requested by an operator (role {})", state.role);
  if (auto w = writeConf(state); !w) return w;
  if (auto s = stop(); !s) return s;
  return start();
}

Result<bool> PgController::reloadNow() {
  std::lock_guard applyLock(applyMu_);
  if (!isRunning()) return Error{"postgres is not running"};
  spdlog::info("pg: reloading postgres' configuration as requested by an operator");
  return reload();
}

Result<ClusterConfigApplied> PgController::applyClusterConfig(const ClusterConfig& config) {
  // Like every writer of dugong.conf: never between another's read of the state and its write.
  std::lock_guard applyLock(applyMu_);
  ClusterConfig previous;
  {
    std::lock_guard lock(clusterMu_);
    previous = std::exchange(cluster_, config);
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
  if (state.role == "sync" || state.role == "async") refreshHotStandbyFloor();
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

void PgController::setMarker(const std::string& what) {
  std::ofstream(markerPath(), std::ios::trunc) << what << "\n";
}

void PgController::clearMarker() {
  std::error_code ec;
  fs::remove(markerPath(), ec);
}

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

Result<bool> PgController::stop() {
  if (!isRunning()) return true;
  auto r = run("pg_ctl", {"stop", "-D", options_.dataDir, "-m", "fast", "-w", "-t",
                          std::to_string(options_.stopTimeout.count())},
               options_.stopTimeout + 10s);
  if (r.ok() || !isRunning()) return true;
  spdlog::warn("pg: fast shutdown did not finish in {} s, stopping immediately", options_.stopTimeout.count());
  r = run("pg_ctl", {"stop", "-D", options_.dataDir, "-m", "immediate", "-w", "-t", "30"}, 40s);
  if (r.ok() || !isRunning()) return true;
  return Error{"could not stop postgres: " + r.describe() + ": " + oneLine(r.output)};
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
Result<bool> PgController::waitSettings(const ManagedState& state) {
  std::string wantRo = state.readOnlyInEffect() ? "on" : "off";
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto q = localQuery("SELECT current_setting('default_transaction_read_only'), "
                        "current_setting('synchronous_standby_names')");
    if (q && !q->rows.empty() && q->rows[0][0] == wantRo) return true;
    last = q ? "default_transaction_read_only is still " + q->rows[0][0].value_or("?") : q.error();
    std::this_thread::sleep_for(50ms);
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
                        {"application_name", "dugong-agent"}});
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

// ---------------------------------------------------------------- replication slots

Result<std::string> PgController::replicationConninfo(const PeerIdentity& peer) const {
  auto c = peerConninfo(peer, true);
  if (!c) return c;
  return c.value() + " " + buildConninfo({{"replication", "true"}});
}

std::optional<std::string> PgController::prepareSlot(const PeerIdentity& upstream, const ManagedState& previous) {
  const std::string slot = slotNameFor(options_.peerId);
  if (previous.slotName && previous.upstreamUrl && previous.upstreamId && *previous.upstreamId != upstream.id) {
    PeerIdentity old;
    old.id = *previous.upstreamId;
    old.pgUrl = *previous.upstreamUrl;
    auto c = replicationConninfo(old);
    auto d = c ? dropSlot(c.value(), *previous.slotName, options_.queryTimeout) : Result<bool>(Error{c.error()});
    if (d) {
      spdlog::info("pg: dropped replication slot {} on the previous upstream {}", *previous.slotName, old.id);
    } else {
      spdlog::warn("pg: could not drop replication slot {} on the previous upstream {} ({}); its WAL is bounded "
                   "by max_slot_wal_keep_size and the slot is dropped when that peer next becomes primary",
                   *previous.slotName, old.id, d.error());
    }
  }
  auto c = replicationConninfo(upstream);
  if (!c) return std::nullopt;
  auto e = ensureSlot(c.value(), slot, options_.queryTimeout);
  if (!e) {
    spdlog::warn("pg: streaming from {} without a replication slot: {}", upstream.id, e.error());
    return std::nullopt;
  }
  if (e->recreated) {
    spdlog::warn("pg: replication slot {} on {} had lost its WAL (more than max_slot_wal_keep_size behind); "
                 "created it again: if this standby cannot stream, it must be rebuilt",
                 slot, upstream.id);
  } else if (e->created) {
    spdlog::info("pg: created replication slot {} on {}", slot, upstream.id);
  }
  return slot;
}

void PgController::dropStaleSlots(const std::optional<std::string>& keepFor) {
  auto q = localQuery("SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'physical' AND NOT active");
  if (!q) {
    spdlog::warn("pg: cannot list replication slots: {}", q.error());
    return;
  }
  const std::string keep = keepFor ? slotNameFor(*keepFor) : "";
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, std::chrono::steady_clock::time_point> stillInactive;
  for (const auto& row : q->rows) {
    std::string name = row[0].value_or("");
    if (!isDugongSlot(name) || name == keep) continue;
    auto seen = inactiveSlotsSince_.find(name);
    const auto since = seen == inactiveSlotsSince_.end() ? now : seen->second;
    if (now - since < options_.dropInactiveSlotAfter) {
      stillInactive[name] = since;
      continue;
    }
    auto d = localQuery("SELECT pg_drop_replication_slot(" + quoteLiteral(name) + ")");
    if (d) {
      spdlog::info("pg: dropped replication slot {}: that peer has not streamed from this primary for {} s", name,
                   std::chrono::duration_cast<std::chrono::seconds>(now - since).count());
    } else {
      spdlog::warn("pg: could not drop replication slot {}: {}", name, d.error());
    }
  }
  inactiveSlotsSince_ = std::move(stillInactive);
  std::lock_guard lock(stateMu_);
  lastSlotSweep_ = now;
}

void PgController::reserveWalForOldUpstream(const ManagedState& previous) {
  if (!previous.upstreamId || *previous.upstreamId == options_.peerId) return;
  const std::string slot = slotNameFor(*previous.upstreamId);
  const auto started = std::chrono::steady_clock::now();
  // Invalidated (it lost its WAL to max_slot_wal_keep_size): dropped and made anew.
  auto q = localQuery("SELECT CASE WHEN restart_lsn IS NULL THEN 'lost' ELSE restart_lsn::text END "
                      "FROM pg_replication_slots WHERE slot_name = " + quoteLiteral(slot));
  if (q && !q->rows.empty() && q->rows[0][0] != "lost") {
    spdlog::info("pg: replication slot {} already keeps this peer's WAL from {} for {}", slot,
                 q->rows[0][0].value_or("?"), *previous.upstreamId);
    return;
  }
  if (q && !q->rows.empty()) localQuery("SELECT pg_drop_replication_slot(" + quoteLiteral(slot) + ")");
  auto c = q ? localQuery("SELECT lsn::text FROM pg_create_physical_replication_slot(" + quoteLiteral(slot) +
                          ", true)")
             : q;
  if (!c || c->rows.empty()) {
    spdlog::warn("pg: could not reserve WAL for {}, the upstream this peer replaces ({}): if it comes back, it may "
                 "need a base backup",
                 *previous.upstreamId, c ? "no answer" : c.error());
    return;
  }
  spdlog::info("pg: reserved this peer's WAL from {} for {}, the upstream it replaces, in replication slot {} "
               "({} ms): it can rejoin by pg_rewind and stream through it; dropped if unused for {} s",
               c->rows[0][0].value_or("?"), *previous.upstreamId, slot,
               msSince(started),
               options_.dropInactiveSlotAfter.count());
}

void PgController::sweepInactiveSlots() {
  std::unique_lock applyLock(applyMu_, std::try_to_lock);
  if (!applyLock.owns_lock()) return;
  std::optional<std::string> sync;
  {
    std::lock_guard lock(stateMu_);
    if (state_.role != "primary" || pending_) return;
    sync = state_.syncId;
  }
  dropStaleSlots(sync);
}

// ---------------------------------------------------------------- rebuilding

Result<std::string> PgController::controlValue(const std::string& key) {
  auto ctl = run("pg_controldata", {"-D", options_.dataDir}, 30s);
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
               "so that pg_rewind can use it",
               state);
  if (isRunning()) return Error{"postgres is running in " + options_.dataDir};
  removeStaleLockFiles();
  CommandResult r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    r = run("postgres", {"--single", "-D", options_.dataDir, "template1"}, options_.rewindTimeout);
    if (r.ok() || !killedBackendsHoldMemory(r.output)) break;
  }
  if (!r.ok()) return Error{"single-user crash recovery " + r.describe() + ": " + oneLine(lastLines(r.output, 3))};
  return true;
}

PgController::Divergence PgController::checkDivergence(const PeerIdentity& source, std::string* detail) {
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

PgController::Divergence PgController::aheadOnSameTimeline(const PeerIdentity& source,
                                                           const std::string& queryConninfo, std::string* detail) {
  // Same timeline: the local data directory must not be ahead of the source.
  auto text = controlValue("Latest checkpoint location:");
  if (!text) return Divergence::kUnknown;
  auto local = WalPosition::parse(text.value());
  auto remote = runQuery(queryConninfo,
                         "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                         "ELSE pg_current_wal_lsn() END::text",
                         options_.queryTimeout);
  if (!local || !remote || remote->rows.empty() || !remote->rows[0][0]) return Divergence::kUnknown;
  auto there = WalPosition::parse(*remote->rows[0][0]);
  if (!there) return Divergence::kUnknown;
  if (local.value() > there.value()) {
    *detail = "same timeline, but the local checkpoint " + local->toString() + " is ahead of " + source.id + " at " +
              there->toString();
    return Divergence::kAhead;
  }
  return Divergence::kCanFollow;
}

namespace {
const char kDiscardCommand[] =
    "If this data is not needed, stop the agent and run `dugong-adm rebuild --config <this agent's dugong.yaml> "
    "--discard-data`; if it is, check the agent's cluster name and ZooKeeper, or set the cluster up from this peer";
}  // namespace

Result<std::string> PgController::localSystemId() {
  auto ctl = run("pg_controldata", {"-D", options_.dataDir}, 30s);
  const std::string key = "Database system identifier:";
  auto at = ctl.output.find(key);
  if (!ctl.ok() || at == std::string::npos) return Error{"pg_controldata " + ctl.describe()};
  auto endl = ctl.output.find('\n', at);
  std::string id = ctl.output.substr(at + key.size(), endl - at - key.size());
  id.erase(0, id.find_first_not_of(' '));
  return id;
}

Result<PeerDataState> PgController::dataState() {
  PeerDataState out;
  out.setUp = isSetUp();
  if (!out.setUp) return out;
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
  spdlog::info("pg: data state: {}", out.describe());
  return out;
}

Result<bool> PgController::guardOtherSystem(const PeerIdentity& source, bool* verified) {
  *verified = false;
  auto local = localSystemId();
  if (!local) return false;
  auto conninfo = peerConninfo(source, true);
  if (!conninfo) return false;
  auto remote = runQuery(conninfo.value() + " " + buildConninfo({{"replication", "true"}}), "IDENTIFY_SYSTEM",
                         options_.queryTimeout);
  if (!remote || remote->rows.empty() || !remote->rows[0][0]) {
    spdlog::warn("pg: cannot read the system identifier of {}: {}", source.id, remote ? "no answer" : remote.error());
    return false;
  }
  *verified = true;
  const std::string there = *remote->rows[0][0];
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
  setMarker("rewind");
  // --no-sync, then syncfs() of the file systems holding the data directory and its
  // WAL: the same durability as pg_rewind's own sync (everything it wrote is on disk
  // before the marker is cleared and postgres starts), without opening and fsyncing
  // every file of the data directory one by one, which dominated a small rewind.
  const auto started = std::chrono::steady_clock::now();
  auto r = run("pg_rewind", {"--no-sync", "-D", options_.dataDir, "--source-server=" + conninfo.value()},
               options_.rewindTimeout, clientEnv());
  if (!r.ok()) return r;
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

PgController::Divergence PgController::rewindIfDiverged(const PeerIdentity& source, std::string* detail,
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
    setMarker("rewind without the WAL to recover");
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
  std::error_code ec;
  bool keptOld = false;
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
  auto r = run("pg_basebackup",
               {"-D", options_.dataDir, "-h", url->host, "-p", std::to_string(url->port), "-U",
                options_.replicationUser, "-X", "stream", "-c", "fast", "-w", "--label=dugong-rebuild"},
               options_.basebackupTimeout, clientEnv());
  if (!r.ok()) {
    std::string err = "pg_basebackup from " + source.id + " " + r.describe() + ": " + oneLine(lastLines(r.output, 3));
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

// ---------------------------------------------------------------- the interface

PgInitialized PgController::init() {
  PgInitialized out;
  out.setUp = isSetUp();
  out.online = out.setUp && isRunning();
  spdlog::info("pg: init: data directory {} is {}set up, postgres is {}", options_.dataDir, out.setUp ? "" : "not ",
               out.online ? "running" : "not running");
  return out;
}

PgConfigApplied PgController::apply(const PgConfig& config) {
  std::lock_guard lock(applyMu_);
  spdlog::info("pg: applying {}", config.toJson().dump());
  {
    std::lock_guard stateLock(stateMu_);
    fence_.reset();
  }
  PgConfigApplied out;
  switch (config.role) {
    case PgRole::kNone: out = applyNone(); break;
    case PgRole::kPrimary: out = applyPrimary(config); break;
    case PgRole::kSync:
    case PgRole::kAsync: out = applyStandby(config, RebuildRules{options_.useRewind, true}, nullptr); break;
  }
  if (out.ok) {
    spdlog::info("pg: applied role {} (postgres {})", pgRoleName(config.role), out.online ? "running" : "stopped");
  } else {
    spdlog::error("pg: applying role {} failed: {}", pgRoleName(config.role), out.error);
  }
  return out;
}

namespace {
PgConfigApplied failed(std::string error, bool online) {
  PgConfigApplied out;
  out.ok = false;
  out.error = std::move(error);
  out.online = online;
  return out;
}
// Data the cluster may need would be replaced: only an operator can resolve it.
PgConfigApplied refused(std::string error, bool online) {
  PgConfigApplied out = failed(std::move(error), online);
  out.refused = true;
  return out;
}
PgConfigApplied succeeded(bool online) {
  PgConfigApplied out;
  out.ok = true;
  out.online = online;
  return out;
}
}  // namespace

bool PgController::ranAsPrimary() {
  {
    std::lock_guard lock(stateMu_);
    if (state_.wasPrimary || state_.role == "primary") return true;
  }
  if (isRunning()) {
    auto q = localQuery("SELECT pg_is_in_recovery()");
    return q && !q->rows.empty() && q->rows[0][0] == "f";
  }
  return !hasStandbySignal();
}

// Stopped, and left in recovery (standby.signal, no upstream): a manual start gives a
// read-only standby that streams from nobody, never a writable primary.
PgConfigApplied PgController::applyNone() {
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
  }
  const bool wasPrimary = isSetUp() && ranAsPrimary();
  auto s = stop();
  if (!s) return failed(s.error(), isRunning());
  if (isSetUp()) {
    ManagedState st;
    {
      std::lock_guard lock(stateMu_);
      st = state_;
    }
    st.role = "none";
    st.wasPrimary = wasPrimary;
    st.readOnly = true;
    auto w = writeConf(st);
    if (!w) return failed(w.error(), false);
    auto sig = writeFileAsOwner(options_.dataDir + "/standby.signal", "", 0600);
    if (!sig) return failed(sig.error(), false);
  }
  return succeeded(false);
}

PgConfigApplied PgController::applyPrimary(const PgConfig& config) {
  ManagedState previous;
  {
    std::lock_guard lock(stateMu_);
    previous = state_;
    pending_.reset();
  }
  ManagedState want;
  want.role = "primary";
  if (config.downstream) want.syncId = config.downstream->id;
  // Read-only until the sync has caught up; a primary that was already writable stays
  // writable when its sync changes (commits then wait for the new sync).
  bool wasWritablePrimary = previous.role == "primary" && !previous.readOnly;
  want.readOnly = config.downstream.has_value() && !wasWritablePrimary;

  bool running = isRunning();
  if (!isSetUp()) {
    if (running) return failed("postgres runs on a data directory that is not set up", true);
    auto i = initdb();
    if (!i) return failed(i.error(), false);
    auto w = writeConf(want);
    if (!w) return failed(w.error(), false);
    auto s = start();
    if (!s) return failed(s.error(), isRunning());
    auto b = bootstrapRoles();
    if (!b) return failed(b.error(), true);
    clearMarker();
  } else {
    if (!running && previous.role == "none" && previous.wasPrimary) {
      // Left in recovery by role none only so that a manual start could not write: it
      // was a primary, and resumes as one without a promotion (no new timeline).
      std::error_code ec;
      fs::remove(options_.dataDir + "/standby.signal", ec);
    }
    bool inRecovery = hasStandbySignal();
    if (running) {
      auto q = localQuery("SELECT pg_is_in_recovery()");
      if (!q) return failed("cannot ask postgres whether it is in recovery: " + q.error(), true);
      inRecovery = q->rows[0][0] == "t";
    }
    if (inRecovery) want.readOnly = config.downstream.has_value();
    auto w = writeConf(want);
    if (!w) return failed(w.error(), running);
    if (running) {
      auto r = reload();
      if (!r) return failed(r.error(), true);
    } else {
      // A stopped standby starts as a standby (standby.signal stays) and is promoted
      // below, so that it switches to a new timeline.
      auto s = start();
      if (!s) return failed(s.error(), isRunning());
    }
    auto ws = waitSettings(want);
    if (!ws) return failed(ws.error(), true);
    if (inRecovery) {
      reserveWalForOldUpstream(previous);
      auto p = promote();
      if (!p) return failed(p.error(), true);
    }
  }
  discardOldDataDir();
  if (want.readOnly) {
    // Stale slots are dropped once writable (pollWritable): not on a failover's path.
    std::lock_guard lock(stateMu_);
    pending_ = Pending{*want.syncId, std::nullopt};
  } else {
    dropStaleSlots(want.syncId);
  }
  return succeeded(true);
}

// Identifies this run of postgres: its start time in microseconds.
const char* const kInstanceSql = "(extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint::text";

PgFenced PgController::fence(const std::optional<PeerIdentity>& newSync) {
  // Serialized with apply() and pollWritable(): a poll that read the configuration
  // before this fence must not write it back after it.
  std::lock_guard applyLock(applyMu_);
  auto fail = [](const std::string& why) { return PgFenced{false, why, 0}; };
  if (!isRunning()) return PgFenced{true, "", 0};
  auto rec = localQuery("SELECT pg_is_in_recovery()");
  if (!rec) return fail("cannot ask postgres whether it is in recovery: " + rec.error());
  Fence fence;
  fence.standby = rec->rows[0][0] == "t";
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
    pending_.reset();  // a fenced primary stays as it is until the next apply
  }
  if (fence.standby) {
    want.primaryConninfo.clear();
  } else {
    if (!newSync) return fail("a primary is fenced for a new sync, and none was given");
    // The takeover's state write may land or not: commits acknowledged from now on must
    // be on the new sync and on the current one, whichever is the sync afterwards.
    // The current one is the sync of the last apply: fenced again (the takeover changed
    // its target), it stays.
    if (!want.alsoSyncId) want.alsoSyncId = want.syncId;
    if (want.alsoSyncId == newSync->id) want.alsoSyncId.reset();
    want.syncId = newSync->id;
    fence.syncId = newSync->id;
    fence.alsoSyncId = want.alsoSyncId;
  }
  auto w = writeConf(want);
  if (!w) return fail(w.error());
  auto r = reload();
  if (!r) return fail(r.error());
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto v = verifyFence(fence);
    if (v) {
      spdlog::info("pg: fenced: {}", fence.standby ? "no longer streaming from the upstream"
                                     : fence.alsoSyncId
                                         ? "commits now wait for both " + fence.syncId + " and " + *fence.alsoSyncId
                                         : "commits now wait for " + fence.syncId + " alone");
      std::lock_guard lock(stateMu_);
      fence_ = fence;
      return PgFenced{true, "", v.value()};
    }
    last = v.error();
    std::this_thread::sleep_for(20ms);
  }
  return fail("the fence did not take effect: " + last);
}

Result<PgInstance> PgController::verifyFence(const Fence& fence) {
  if (fence.standby) {
    auto q = localQuery(std::string("SELECT current_setting('primary_conninfo'), "
                                    "(SELECT count(*) FROM pg_stat_wal_receiver), pg_is_in_recovery(), ") +
                        kInstanceSql);
    if (!q) return Error{q.error()};
    const Row& row = q->rows.at(0);
    if (row[2] != "t") return Error{"postgres is no longer in recovery"};
    if (row[0].value_or("") != "") return Error{"primary_conninfo is not empty yet"};
    if (row[1] != "0") return Error{"a WAL receiver still runs"};
    return static_cast<PgInstance>(std::stoull(row[3].value_or("0")));
  }
  // The setting, parsed, and what every walsender itself uses: only the new sync (and
  // the current one) may have a sync priority, since only a walsender with one releases
  // waiting commits.
  std::vector<std::string> waitFor{fence.syncId};
  if (fence.alsoSyncId) waitFor.push_back(*fence.alsoSyncId);
  std::string others;
  for (const auto& name : waitFor) others += (others.empty() ? "" : ", ") + quoteLiteral(name);
  auto q = localQuery("SELECT current_setting('synchronous_standby_names'), "
                      "(SELECT count(*) FROM pg_stat_replication WHERE application_name NOT IN (" +
                      others +
                      ") AND (sync_priority > 0 OR sync_state <> 'async')), "
                      "(SELECT count(*) FROM pg_stat_replication WHERE application_name = " +
                      quoteLiteral(fence.syncId) + " AND sync_priority = 0), pg_is_in_recovery(), " + kInstanceSql);
  if (!q) return Error{q.error()};
  const Row& row = q->rows.at(0);
  if (row[3] != "f") return Error{"postgres is in recovery"};
  if (!waitsForAll(row[0].value_or(""), waitFor)) {
    return Error{"synchronous_standby_names is '" + row[0].value_or("") + "', not " + fence.syncId +
                 (fence.alsoSyncId ? " and " + *fence.alsoSyncId + " together" : " alone")};
  }
  if (row[1] != "0") return Error{"a walsender of another standby still has a sync priority"};
  if (row[2] != "0") return Error{"the walsender of " + fence.syncId + " has not taken the new setting yet"};
  return static_cast<PgInstance>(std::stoull(row[4].value_or("0")));
}

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
  }
  bool running = isRunning();
  if (running && repair.empty() && isSetUp() && hasStandbySignal() && !previous.wasPrimary &&
      previous.upstreamId == upstream.id &&
      previous.primaryConninfo == want.primaryConninfo) {
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
    if (q->rows[0][0] == "t" && !previous.wasPrimary && repair.empty()) {
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

  // WAL the upstream no longer has: no rewind can help.
  const bool copyToRepair = !repair.empty() && repair.find("has already been removed") != std::string::npos;
  if (!isSetUp() || replaceOther || copyToRepair) {
    if (!rules.basebackup) return failed("no usable data directory to rejoin with; nothing was changed", false);
    spdlog::info("pg: {}: rebuilding from {} by pg_basebackup",
                 replaceOther   ? "another database system, replaced by the operator's command"
                 : copyToRepair ? "a standby whose upstream no longer has the WAL it needs"
                                : "no usable data directory",
                 restore.id);
    auto b = basebackup(restore);
    if (!b) return failed(b.error(), false);
  } else if (!hasStandbySignal() || previous.wasPrimary || !repair.empty()) {
    // Last ran as a primary (or a standby that went past a fork): it may have WAL the
    // cluster does not have.
    std::string detail;
    std::string discarded;
    auto recovered = finishCrashRecovery(previous.wasPrimary);
    if (!recovered) spdlog::warn("pg: cannot finish crash recovery before pg_rewind: {}", recovered.error());
    // With a rewind allowed, pg_rewind runs once, for real: it changes nothing when no
    // rewind is required, and a separate dry run would read the same WAL twice.
    const bool rewindAtOnce = rules.rewind && verified;
    auto d = rewindAtOnce ? rewindIfDiverged(restore, &detail, &discarded) : checkDivergence(restore, &detail);
    if (d == Divergence::kCanFollow) {
      spdlog::info("pg: the data directory can follow {} as it is: {}", restore.id, detail);
    } else if (d == Divergence::kRewound) {
      spdlog::warn("pg: rewound the data directory to follow {}: discarded {}", restore.id, discarded);
      if (report) {
        report->rewound = true;
        report->discarded = discarded;
      }
    } else {
      spdlog::warn("pg: the data directory cannot follow {} as it is ({})", restore.id, detail);
      if (d == Divergence::kAhead && !options_.replaceUnknownData) {
        return refused("refusing to replace the data directory " + options_.dataDir + ": it has WAL that " +
                          restore.id + " does not have (" + detail + "). Nothing was changed. " + kDiscardCommand,
                      false);
      }
      if (!verified) {
        return failed("not rebuilding from " + restore.id + ": its system identifier could not be compared with "
                          "this data directory's (" + detail + ")",
                      false);
      }
      if (!rules.basebackup) {
        return failed(std::string(rules.rewind ? "pg_rewind failed" : "it cannot follow without discarding WAL") +
                          " (" + detail + "); the data directory was not copied: `dugong-adm rebuild` rebuilds it",
                      false);
      }
      if (d == Divergence::kUnknown && rewindAtOnce) {
        spdlog::warn("pg: pg_rewind failed, falling back to pg_basebackup: {}", detail);
      }
      auto b = basebackup(restore);
      if (!b) return failed(b.error(), false);
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

bool PgController::awaitUpstreamStop(std::chrono::milliseconds timeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeout;
  bool sawStream = false;
  for (;;) {
    auto q = localQuery("SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver), "
                        "pg_last_wal_receive_lsn()::text");
    if (!q || q->rows.empty() || q->rows[0][0] != "t") {
      spdlog::info("pg: not waiting for the upstream to stop: {}", q ? "not a standby" : q.error());
      return false;
    }
    const bool streaming = q->rows[0][1] == "streaming";
    if (streaming) sawStream = true;
    if (!streaming && sawStream) {
      spdlog::info("pg: the upstream's WAL stream ended after {} ms (received up to {}): it stopped",
                   msSince(started),
                   q->rows[0][2].value_or("?"));
      return true;
    }
    if (!streaming && !sawStream) {
      spdlog::info("pg: not waiting for the upstream to stop: no WAL stream ({})", q->rows[0][1].value_or("none"));
      return false;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn("pg: the upstream still streams after {} ms: taking over without waiting longer", timeout.count());
      return false;
    }
    std::this_thread::sleep_for(50ms);
  }
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
  }
  return out;
}

Result<SyncStandbyView> PgController::syncStandby(const std::string& standbyName) const {
  auto r = localQuery(syncStandbyQuery(standbyName));
  if (!r) return Error{r.error()};
  return parseSyncStandbyView(*r);
}

WalPositionRead PgController::readWal() {
  WalPositionRead out;
  std::optional<Fence> fence;
  {
    std::lock_guard lock(stateMu_);
    fence = fence_;
  }
  std::optional<PgInstance> fencedRun;
  if (fence) {
    auto v = verifyFence(*fence);
    if (!v) {
      out.error = "the fence no longer holds: " + v.error();
      return out;
    }
    fencedRun = v.value();
  }
  auto q = localQuery(
      "SELECT CASE WHEN pg_is_in_recovery() "
      "THEN GREATEST(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) "
      "ELSE pg_current_wal_lsn() END::text, " + std::string(kInstanceSql));
  if (!q) {
    out.error = q.error();
    return out;
  }
  if (q->rows.empty() || !q->rows[0][0]) {
    out.error = "postgres reports no WAL position";
    return out;
  }
  auto pos = WalPosition::parse(*q->rows[0][0]);
  if (!pos) {
    out.error = pos.error();
    return out;
  }
  // Its timelines, which tell histories apart where positions do not (the initWal
  // check, statemachine/peer.cc): read from pg_wal after the position, so the segments
  // holding it are there.
  auto history = readTimelineHistory(options_.dataDir + "/pg_wal", pos.value());
  if (!history) {
    out.error = "cannot read the timelines of the WAL: " + history.error();
    return out;
  }
  out.position = pos.value();
  out.history = std::move(history.value());
  out.instance = std::stoull(q->rows[0][1].value_or("0"));
  if (fencedRun && *fencedRun != out.instance) {
    out.position.reset();
    out.error = "postgres restarted while the WAL position was read under a fence";
  }
  return out;
}

Result<bool> PgController::healthCheck() {
  // A fresh connection, not a kept one: the check is that postgres still takes new
  // sessions. A hung postmaster (or one that stopped forking) leaves existing backends
  // answering.
  // pg_current_logfile(): where postgres writes its log when logging_collector is on
  // (NULL when off: then stderr, the file pg_ctl -l names).
  auto q = runQuery(localConninfo(),
                    "SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver), pg_current_logfile()",
                    options_.queryTimeout);
  if (!q) return Error{q.error()};
  std::string upstream;
  PeerIdentity upstreamPeer;
  std::optional<std::string> slot;
  {
    std::lock_guard lock(stateMu_);
    if (state_.role == "sync" || state_.role == "async") {
      upstream = state_.upstreamId.value_or("");
      upstreamPeer.id = upstream;
      upstreamPeer.pgUrl = state_.upstreamUrl.value_or("");
      slot = state_.slotName;
    }
  }
  const auto& row = q->rows.at(0);
  const bool notStreaming = !upstream.empty() && row[0] == "t" && row[1] != "streaming";
  // Why not: the server log's tail, read once.
  std::string serverLog = options_.logPath();
  if (row.size() > 2 && row[2] && !row[2]->empty()) {
    serverLog = (*row[2])[0] == '/' ? *row[2] : options_.dataDir + "/" + *row[2];
  }
  const std::string logTail = notStreaming ? lastLines(readFile(serverLog), 20) : "";
  if (notStreaming && slot && !upstreamPeer.pgUrl.empty()) recreateMissingSlot(upstreamPeer, *slot, logTail);
  bool sweep = false;
  if (row[0] == "f") {
    std::lock_guard lock(stateMu_);
    sweep = std::chrono::steady_clock::now() - lastSlotSweep_ >= std::chrono::seconds(60);
  }
  if (sweep) sweepInactiveSlots();
  std::lock_guard lock(stateMu_);
  if (!notStreaming) {
    notStreamingSince_.reset();
    streamReported_.reset();
    streamProblem_.clear();
    return true;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!notStreamingSince_) notStreamingSince_ = now;
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - *notStreamingSince_);
  auto evidence = cannotFollowEvidence(logTail);
  streamProblem_ = "not streaming from " + upstream + " for " + std::to_string(secs.count()) + " s (WAL receiver " +
                   row[1].value_or("absent") + ")" + (evidence ? ": " + *evidence : "");
  if (secs >= 10s && (!streamReported_ || now - *streamReported_ >= 30s)) {
    // Rate-limited: what the operator needs to see why, e.g. the upstream's refusal.
    streamReported_ = now;
    const auto why = lineWith(logTail, "FATAL:");
    spdlog::warn("pg: this standby is {}{}", streamProblem_, why ? "; its server log says: " + *why : "");
  }
  if (!evidence || secs < options_.repairStandbyAfter) return true;
  repairFor_ = *evidence;
  return Error{"this standby cannot follow its upstream " + upstream + " (" + streamProblem_ +
               "); the next apply repairs it by pg_rewind, else pg_basebackup"};
}

// A slot its upstream dropped (a primary drops the inactive slots of the peers that are
// not its sync) refuses this standby for good: "replication slot ... does not exist" in
// its log. Created again, the WAL receiver's next attempt streams.
void PgController::recreateMissingSlot(const PeerIdentity& upstream, const std::string& slot,
                                       const std::string& logTail) {
  if (!lineWith(lastLines(logTail, 5), "replication slot \"" + slot + "\" does not exist")) return;
  auto c = replicationConninfo(upstream);
  auto e = c ? ensureSlot(c.value(), slot, options_.queryTimeout) : Result<SlotEnsured>(Error{c.error()});
  if (!e) {
    spdlog::warn("pg: the upstream {} has no replication slot {} for this standby, and creating it failed: {}",
                 upstream.id, slot, e.error());
  } else if (e->created || e->recreated) {
    spdlog::warn("pg: the upstream {} had dropped replication slot {}: created it again, so that this standby streams",
                 upstream.id, slot);
  }
}

PgStatus PgController::status() {
  PgStatus s;
  {
    std::lock_guard lock(stateMu_);
    s.role = state_.role;
    if (state_.role == "sync" || state_.role == "async") s.upstream = state_.upstreamId;
    if (state_.role == "primary") s.sync = state_.syncId;
    s.waitingForSync = pending_.has_value();
    s.writesStopped = state_.writesStopped;
  }
  auto q = localQuery(
      "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'), "
      "CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, "
      "pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, "
      "EXTRACT(EPOCH FROM (now() - pg_last_xact_replay_timestamp()))::float8, "
      "CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END, "
      "COALESCE((SELECT received_tli FROM pg_stat_wal_receiver), "
      "         (SELECT timeline_id FROM pg_control_checkpoint())), "
      "(SELECT status FROM pg_stat_wal_receiver), "
      // The walsenders in the same round trip, as one JSON array of rows.
      "(SELECT json_agg(json_build_array(application_name, state, sync_state, sent_lsn::text, write_lsn::text, "
      "                                  flush_lsn::text, replay_lsn::text) ORDER BY application_name) "
      " FROM pg_stat_replication), "
      // Settings changed in the configuration that take effect only at a restart.
      "(SELECT json_agg(name ORDER BY name) FROM pg_settings WHERE pending_restart), "
      "(SELECT json_object_agg(name, setting) FROM pg_settings WHERE name IN ('max_connections', "
      "  'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction'))");
  if (!q) {
    s.error = q.error();
    return s;
  }
  s.online = true;
  const Row& r = q->rows.at(0);
  s.inRecovery = r[0] == "t";
  s.readOnly = s.inRecovery || r[1] == "on";
  s.currentLsn = r[2];
  s.receiveLsn = r[3];
  s.replayLsn = r[4];
  if (r[5]) s.replayLagSeconds = std::stod(*r[5]);
  if (r[6] && r[6]->size() >= 8) {
    s.timeline = static_cast<int>(std::stoul(r[6]->substr(0, 8), nullptr, 16));
  } else if (r[7]) {
    s.timeline = std::stoi(*r[7]);
  }
  s.walReceiverStatus = r[8];
  {
    std::lock_guard lock(stateMu_);
    if (!streamProblem_.empty()) s.streamProblem = streamProblem_;
  }
  if (r[10]) {
    auto names = nlohmann::json::parse(*r[10], nullptr, false);
    if (names.is_array()) {
      for (const auto& n : names) {
        if (n.is_string()) s.pendingRestart.push_back(n.get<std::string>());
      }
    }
  }
  if (r[11]) {
    auto values = nlohmann::json::parse(*r[11], nullptr, false);
    if (values.is_object()) {
      for (const auto& [k, v] : values.items()) {
        if (v.is_string()) s.hotStandbyValues[k] = std::stol(v.get<std::string>());
      }
    }
  }
  if (!r[9]) return s;
  const auto rows = nlohmann::json::parse(*r[9], nullptr, false);
  if (!rows.is_array()) {
    s.error = "pg_stat_replication could not be read: " + *r[9];
    return s;
  }
  auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : std::string(); };
  auto lsn = [](const nlohmann::json& v) { return v.is_string() ? std::optional(v.get<std::string>()) : std::nullopt; };
  for (const auto& row : rows) {
    if (!row.is_array() || row.size() != 7) continue;
    ReplicationRow rr;
    rr.applicationName = text(row[0]);
    rr.state = text(row[1]);
    rr.syncState = text(row[2]);
    rr.sentLsn = lsn(row[3]);
    rr.writeLsn = lsn(row[4]);
    rr.flushLsn = lsn(row[5]);
    rr.replayLsn = lsn(row[6]);
    s.replication.push_back(std::move(rr));
  }
  return s;
}

Result<std::optional<ManagedState>> PgController::markWritesStopped(bool evenIfDown) {
  if (!evenIfDown && !isRunning()) return std::optional<ManagedState>();
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  if (want.role != "primary") return std::optional<ManagedState>();  // a standby accepts no writes
  want.writesStopped = true;
  if (auto w = writeConf(want); !w) return Error{w.error()};
  return std::optional<ManagedState>(want);
}

Result<WritesStopped> PgController::stopWrites() {
  const auto started = std::chrono::steady_clock::now();
  std::lock_guard applyLock(applyMu_);
  WritesStopped out;
  auto marked = markWritesStopped();
  if (!marked) return Error{"stopping writes: " + marked.error()};
  if (!marked->has_value()) return out;
  const ManagedState& want = **marked;
  // Every client session over TCP goes (the Unix socket is only root's and postgres'):
  // those waiting for their sync (their clients get an error,
  // not a success), those with an open write transaction, and those that may have
  // made themselves read-write. Reload and the first round in one round trip, at once;
  // once new sessions are read-only, a second round for sessions that started while
  // the reload was under way.
  const std::string terminate =
      "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
      "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND client_addr IS NOT NULL";
  auto first = localQuery("SELECT pg_reload_conf(); " + terminate);
  if (!first) return Error{"stopping writes: " + first.error()};
  auto ws = waitSettings(want);
  if (!ws) return Error{"stopping writes: " + ws.error()};
  auto second = localQuery(terminate + " AND backend_start < statement_timestamp()");
  if (!second) return Error{"stopping writes: terminating client sessions: " + second.error()};
  out.terminated =
      std::stoi(first->rows.at(0)[0].value_or("0")) + std::stoi(second->rows.at(0)[0].value_or("0"));
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  spdlog::warn("pg: writes stopped: the primary is read-only, {} client sessions terminated ({} ms)", out.terminated,
               out.took.count());
  return out;
}

bool PgController::signalPrimaryShutdown() const {
  {
    std::lock_guard lock(stateMu_);
    if (state_.role != "primary") return false;  // a standby accepts no writes
  }
  std::ifstream in(options_.dataDir + "/postmaster.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0 || !lockFileHeldByLivePostmaster(options_.dataDir + "/postmaster.pid")) return false;
  if (::kill(static_cast<pid_t>(pid), SIGINT) != 0) return false;
  spdlog::warn("pg: asked the primary's postmaster (pid {}) for a fast shutdown: no session can commit on it", pid);
  return true;
}

// The signal first, with no lock and no file written: neither a transition holding the
// apply lock (a restart, a fence) nor a file system that cannot take the managed
// configuration can delay the shutdown (safety review of fcef921, findings 5 and 6). Then,
// under the lock, what a later start needs: the configuration marked write-stopped, and
// pg_ctl's own stop (immediate after stopTimeout) to wait for the postmaster's end.
Result<bool> PgController::shutDownWrites(bool signalledBefore) {
  const auto started = std::chrono::steady_clock::now();
  const bool signalled = signalPrimaryShutdown() || signalledBefore;
  std::lock_guard applyLock(applyMu_);
  auto marked = markWritesStopped(signalled);
  if (!marked) {
    if (!signalled) return Error{"shutting down: " + marked.error()};
    spdlog::error("pg: the primary is shutting down, but its configuration could not be marked write-stopped ({}): "
                  "a start by hand would be writable",
                  marked.error());
  } else if (!marked->has_value() && !signalled) {
    return true;
  }
  auto s = stop();
  if (!s) return Error{"shutting down: " + s.error()};
  spdlog::warn("pg: the primary is shut down: no session can commit on it ({} ms)",
               msSince(started));
  return true;
}

Result<bool> PgController::resumeWrites() {
  std::lock_guard applyLock(applyMu_);
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  if (!want.writesStopped) return true;
  want.writesStopped = false;
  auto w = writeConf(want);
  if (w) w = reload();
  if (w) w = waitSettings(want);
  if (!w) return Error{"resuming writes: " + w.error()};
  spdlog::info("pg: writes resumed: the primary is {}", want.readOnly ? "read-only until its sync has caught up"
                                                                       : "writable");
  return true;
}

bool PgController::writablePending() const {
  std::lock_guard lock(stateMu_);
  return pending_.has_value();
}

void PgController::reportSyncWait(const Pending& pending) {
  {
    std::lock_guard lock(stateMu_);
    if (pending_) pending_->reported = std::chrono::steady_clock::now();
  }
  auto q = localQuery("SELECT coalesce(json_agg(json_build_array(application_name, state, sync_state, sync_priority, "
                      "flush_lsn::text)), '[]')::text, current_setting('synchronous_standby_names'), "
                      "pg_current_wal_lsn()::text FROM pg_stat_replication");
  if (!q) {
    spdlog::warn("pg: still read-only, waiting for sync {} to stream synchronously ({})", pending.syncId, q.error());
    return;
  }
  const Row& row = q->rows.at(0);
  spdlog::warn("pg: still read-only, waiting for sync {} to stream synchronously: the walsenders [name, state, "
               "sync_state, priority, flush] are {}, synchronous_standby_names is '{}', this primary is at {}",
               pending.syncId, row[0].value_or("[]"), row[1].value_or(""), row[2].value_or("?"));
  // A walsender of the sync that has streamed for 10 s without a sync priority, although
  // the setting names it, is ended: the standby reconnects, and a new walsender reads
  // its priority afresh.
  auto ended = localQuery("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = " +
                          quoteLiteral(pending.syncId) + " AND state = 'streaming' AND sync_priority = 0");
  if (ended && !ended->rows.empty() && ended->rows[0][0].value_or("0") != "0") {
    spdlog::warn("pg: ended the walsender of sync {}: it streamed without a sync priority although "
                 "synchronous_standby_names names it; the standby reconnects",
                 pending.syncId);
  }
}

bool PgController::pollWritable() {
  std::unique_lock applyLock(applyMu_, std::try_to_lock);
  if (!applyLock.owns_lock()) return false;
  Pending pending;
  ManagedState state;
  {
    std::lock_guard lock(stateMu_);
    if (!pending_) return state_.role == "primary" && !state_.readOnly;
    pending = *pending_;
    state = state_;
  }
  auto q = localQuery("SELECT pg_current_wal_lsn()::text, flush_lsn::text FROM pg_stat_replication "
                      "WHERE application_name = " + quoteLiteral(pending.syncId) +
                      " AND state = 'streaming' AND sync_state = 'sync'");
  if (!q || q->rows.empty() || !q->rows[0][0] || !q->rows[0][1]) {
    if (std::chrono::steady_clock::now() - pending.reported >= 10s) reportSyncWait(pending);
    return false;
  }
  auto current = WalPosition::parse(*q->rows[0][0]);
  auto flush = WalPosition::parse(*q->rows[0][1]);
  if (!current || !flush) return false;
  if (!pending.targetLsn) {
    pending.targetLsn = current->value();
    std::lock_guard lock(stateMu_);
    if (pending_) pending_->targetLsn = pending.targetLsn;
    spdlog::info("pg: sync {} streams synchronously; waiting for it to reach {}", pending.syncId,
                 current->toString());
  }
  if (flush->value() < *pending.targetLsn) return false;
  if (testHook_) testHook_("pollWritable:beforeWrite");
  state.readOnly = false;
  auto w = writeConf(state);
  if (w) w = reload();
  if (w) w = waitSettings(state);
  if (!w) {
    spdlog::error("pg: could not make the primary writable: {}", w.error());
    return false;
  }
  {
    std::lock_guard lock(stateMu_);
    pending_.reset();
  }
  spdlog::info("pg: sync {} has caught up (flush {}): the primary is writable", pending.syncId, flush->toString());
  dropStaleSlots(pending.syncId);
  return true;
}

}  // namespace dugong::pg
