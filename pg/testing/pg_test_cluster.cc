#include "pg/testing/pg_test_cluster.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "pg/command.h"
#include "pg/testing/initdb_template.h"

namespace dugong::pg::testing {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string PgTestNode::conninfo() const {
  return buildConninfo({{"host", "127.0.0.1"},
                        {"port", std::to_string(port)},
                        {"user", options.superuser},
                        {"password", options.superuserPassword.value_or("")},
                        {"dbname", "postgres"},
                        {"application_name", "dugong-test"}});
}

Result<QueryResult> PgTestNode::sql(const std::string& text, std::chrono::milliseconds timeout) const {
  return runQuery(conninfo(), text, timeout);
}

std::string PgTestNode::value(const std::string& text, std::chrono::milliseconds timeout) const {
  auto r = sql(text, timeout);
  if (!r) return "ERROR: " + r.error();
  if (r->rows.empty() || r->rows[0].empty()) return "";
  return r->rows[0][0].value_or("NULL");
}

std::optional<pid_t> PgTestNode::postmasterPid() const {
  std::ifstream in(options.dataDir + "/postmaster.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return std::nullopt;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size() || text[close + 2] == 'Z') return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool PgTestNode::signalPostmaster(int signal) const {
  auto pid = postmasterPid();
  return pid && ::kill(*pid, signal) == 0;
}

void PgTestNode::forceStop() const {
  if (!postmasterPid()) return;
  CommandSpec spec;
  spec.argv = {options.binDir + "/pg_ctl", "stop", "-D", options.dataDir, "-m", "immediate", "-w", "-t", "20"};
  spec.runAsUser = options.osUser;
  spec.timeout = 30s;
  runCommand(spec);
  if (auto pid = postmasterPid()) {
    ::kill(*pid, SIGKILL);
    for (int i = 0; i < 100 && postmasterPid(); ++i) std::this_thread::sleep_for(50ms);
  }
}

PgTestCluster::PgTestCluster(const std::string& prefix) : scratch_(prefix) {}

PgTestCluster::~PgTestCluster() { stopAll(); }

void PgTestCluster::makePgBackRestDirs() const {
  const passwd* pw = ::getpwnam("postgres");
  for (const std::string sub : {"/repo", "/log", "/lock"}) {
    fs::create_directories(dir() + sub);
    if (pw) (void)::chown((dir() + sub).c_str(), pw->pw_uid, pw->pw_gid);
  }
}

void PgTestCluster::stopAll() {
  for (const auto& n : nodes_) n.forceStop();
}

PgTestNode& PgTestCluster::addNode(const std::string& id, System system) {
  PgTestNode n;
  n.id = id;
  n.port = dugong::testing::freeLoopbackPort();
  n.dir = scratch_.path() + "/" + id;
  fs::create_directories(n.dir);
  n.options.dataDir = n.dir + "/data";
  n.options.binDir = testBinDir(n.options.binDir, system == System::kShared ? Initdb::kFromTemplate : Initdb::kReal);
  n.options.port = n.port;
  n.options.listenAddress = "127.0.0.1";
  n.options.peerId = id;
  n.options.replicationCidr = "127.0.0.1/32";
  n.options.superuserPassword = kTestSuperuserPassword;
  n.options.replicationPassword = kTestReplicationPassword;
  n.options.settings = {{"shared_buffers", "16MB"},     {"max_wal_size", "64MB"},   {"min_wal_size", "32MB"},
                        {"wal_keep_size", "256MB"},     {"max_connections", "30"},  {"checkpoint_timeout", "5min"},
                        {"log_line_prefix", "%m [%p] "}, {"wal_buffers", "1MB"},
                        // No flush to the disk: only a crash of the host would show it, and no
                        // test crashes the host (a killed postgres loses nothing the kernel
                        // has). The adapter's and the agents' own settings are untouched.
                        // Record 0088.
                        {"fsync", "off"}};
  n.options.startTimeout = 60s;
  n.options.stopTimeout = 30s;
  n.options.promoteTimeout = 30s;
  n.options.basebackupTimeout = 600s;
  n.options.rewindTimeout = 600s;
  n.options.queryTimeout = 5000ms;
  n.options.healthInterval = 200ms;
  n.options.writablePollInterval = 100ms;
  n.identity.id = id;
  n.identity.ip = "127.0.0.1";
  n.identity.pgUrl = "tcp://postgres@127.0.0.1:" + std::to_string(n.port) + "/postgres";
  n.identity.zoneId = "test";
  nodes_.push_back(std::move(n));
  return nodes_.back();
}

bool runUntil(boost::asio::io_context& loop, const std::function<bool()>& done, std::chrono::milliseconds deadline) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (!done() && std::chrono::steady_clock::now() < end) {
    loop.restart();
    if (loop.run_for(20ms) == 0) std::this_thread::sleep_for(10ms);
  }
  return done();
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline) {
  auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return condition();
}

}  // namespace dugong::pg::testing
