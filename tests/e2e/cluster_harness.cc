#include "tests/e2e/cluster_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ops/http_client.h"
#include "pg/testing/initdb_template.h"
#include "tests/support/test_env.h"
#include "zk/testing/shared_zookeeper.h"

namespace dugong::e2e {

namespace {

void waitPid(pid_t pid, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return;
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

// Copies an agent's log pipe into its log file on a thread of its own, until stalled.
class LogRelay {
 public:
  explicit LogRelay(const std::string& logPath) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("e2e: pipe failed");
    readFd_ = fds[0];
    writeFd_ = fds[1];
    // As small as the kernel allows: a stall fills it at once.
    ::fcntl(writeFd_, F_SETPIPE_SZ, 4096);
    logFd_ = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    thread_ = std::thread([this] { run(); });
  }
  ~LogRelay() {
    stalled_ = false;
    done_ = true;
    thread_.join();
    ::close(readFd_);
    ::close(writeFd_);
    if (logFd_ >= 0) ::close(logFd_);
  }
  int writeFd() const { return writeFd_; }
  // Stops reading, then fills the pipe through a description of its own (non-blocking,
  // so the agent's own stays blocking).
  void stall() {
    stalled_ = true;
    while (!paused_) std::this_thread::sleep_for(10ms);
    const int filler = ::open(("/proc/self/fd/" + std::to_string(writeFd_)).c_str(), O_WRONLY | O_NONBLOCK);
    const std::string block(4096, '.');
    while (filler >= 0 && ::write(filler, block.data(), block.size()) > 0) {
    }
    if (filler >= 0) ::close(filler);
  }
  void resume() { stalled_ = false; }

 private:
  void run() {
    char buf[8192];
    while (!done_) {
      if (stalled_) {
        paused_ = true;
        std::this_thread::sleep_for(20ms);
        continue;
      }
      paused_ = false;
      pollfd p{readFd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(readFd_, buf, sizeof buf);
      if (n <= 0) continue;
      if (logFd_ >= 0 && ::write(logFd_, buf, static_cast<size_t>(n)) < 0) continue;
    }
  }
  int readFd_ = -1;
  int writeFd_ = -1;
  int logFd_ = -1;
  std::atomic<bool> stalled_{false};
  std::atomic<bool> paused_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

Harness::Harness(HarnessOptions options)
    : options_(options),
      agentBinDir_(pg::testing::testBinDir(
          pg::PgOptions{}.binDir, options.realInitdb ? pg::testing::Initdb::kReal : pg::testing::Initdb::kFromTemplate)) {
  pgs_ = std::make_unique<pg::testing::PgTestCluster>("dugong-e2e");
  const bool mayShare = !options_.ownZooKeeper && options_.zookeeper == dugong::testing::ZooKeeperOptions{};
  if (auto shared = mayShare ? dugong::testing::sharedZooKeeperConnect() : std::nullopt) {
    // A chroot named after the scratch directory (unique while it exists); a client's
    // chroot must exist, so a client without one makes it first.
    sharedServer_ = *shared;
    chroot_ = "/" + std::filesystem::path(pgs_->dir()).filename().string();
    zk::ZkOptions maker;
    maker.connectString = sharedServer_;
    maker.root = chroot_;
    maker.sessionTimeoutMs = options_.sessionTimeoutMs;
    auto client = zk::Client::connect(maker, 20s);
    auto made = client ? client.value()->ensureLayout() : Result<bool>(Error{client.error()});
    if (!made) throw std::runtime_error("e2e: cannot make " + chroot_ + " on the shared ZooKeeper: " + made.error());
  } else {
    zk_ = std::make_unique<dugong::testing::ZooKeeperCluster>(options_.zookeeper);
  }
  if (options_.tlsOnly) {
    auto certs = pg::testing::makeTestCerts(pgs_->dir() + "/certs", "e2e", "postgres");
    if (!certs) throw std::runtime_error("e2e: " + certs.error());
    certs_ = certs.value();
  }
  for (int i = 0; i < options_.peers; ++i) addPeer();
  auto client = zk::Client::connect(zkOptions(), 20s);
  if (!client) throw std::runtime_error("e2e: cannot connect to the test ZooKeeper: " + client.error());
  client_ = std::move(client).value();
}

std::string Harness::zkConnect() const { return zk_ ? zk_->connectString() : sharedServer_ + chroot_; }

dugong::testing::ZooKeeperCluster& Harness::zookeeper() {
  if (!zk_) throw std::logic_error("e2e: this harness works on the shared ZooKeeper: set HarnessOptions::ownZooKeeper");
  return *zk_;
}

void Harness::rebuildZooKeeperEmpty() {
  client_.reset();
  zookeeper().rebuildEmpty();
  if (!reconnectClient()) throw std::runtime_error("e2e: cannot connect to the rebuilt ZooKeeper");
}

Harness::~Harness() {
  for (auto& p : peers_) {
    if (p.agentPid > 0) {
      ::kill(p.agentPid, SIGCONT);
      ::kill(p.agentPid, SIGKILL);
      ::waitpid(p.agentPid, nullptr, 0);
      p.agentPid = -1;
    }
  }
  client_.reset();
  pgs_->stopAll();
  relays_.clear();
}

zk::ZkOptions Harness::zkOptions() const {
  zk::ZkOptions o;
  o.connectString = zk_ ? zk_->connectString() : sharedServer_;
  o.chroot = chroot_;
  o.cluster = options_.cluster;
  o.sessionTimeoutMs = options_.sessionTimeoutMs;
  o.auth = options_.zkAuth;
  return o;
}

int Harness::addPeer(bool singleton) {
  const std::string id = "peer" + std::to_string(peers_.size() + 1);
  E2EPeer p;
  p.pg = &pgs_->addNode(id);
  if (certs_) {
    pg::PgTls& tls = p.pg->options.tls;
    tls.certFile = certs_->certFile;
    tls.keyFile = certs_->keyFile;
    tls.caFile = certs_->caFile;
    tls.hostsslOnly = true;
    tls.sslmode = "verify-full";
  }
  p.pg->options.binDir = agentBinDir_;
  p.id = id;
  p.httpPort = dugong::testing::freeLoopbackPort();
  p.configPath = p.pg->dir + "/dugong.yaml";
  p.logPath = p.pg->dir + "/agent.log";
  p.singleton = singleton;
  writeConfig(p);
  peers_.push_back(p);
  return static_cast<int>(peers_.size()) - 1;
}

void Harness::writeConfig(const E2EPeer& p) const {
  const pg::PgOptions& o = p.pg->options;
  std::ofstream out(p.configPath);
  const std::string servers = zkOptions().connectString;
  out << "cluster: " << options_.cluster << "\n"
      << "zookeeper:\n  connect: "
      << (options_.agentZkConnect ? options_.agentZkConnect(static_cast<int>(peers_.size()), servers) : servers);
  if (!chroot_.empty()) out << "\n  chroot: " << chroot_;
  out << "\n  sessionTimeoutMs: " << options_.sessionTimeoutMs
      << "\n  tickTimeMs: " << options_.zookeeper.tickTimeMs << "\n" << options_.zkConfig;
  if (options_.zkAuth) {
    out << "  auth:\n    user: " << options_.zkAuth->user
        << "\n    password: " << nlohmann::json(options_.zkAuth->password).dump() << "\n";
  }
  out
      << "peer:\n  id: " << p.id << "\n  ip: 127.0.0.1\n  zoneId: e2e\n"
      << "postgres:\n  dataDir: " << o.dataDir << "\n  binDir: " << o.binDir << "\n  port: " << o.port
      << "\n  listenAddress: 127.0.0.1\n"
      << "  replicationCidr: 127.0.0.1/32\n  healthIntervalMs: 300\n";
  // Secured as in production: the superuser's password inline, the replication role's
  // from a file (both forms are tested).
  if (o.superuserPassword) out << "  superuserPassword: " << nlohmann::json(*o.superuserPassword).dump() << "\n";
  if (o.replicationPassword) {
    const std::string file = p.pg->dir + "/replication.pw";
    std::ofstream(file) << *o.replicationPassword << "\n";
    ::chmod(file.c_str(), 0600);
    out << "  replicationPasswordFile: " << file << "\n";
  }
  if (o.allowTrust) out << "  allowTrust: true\n";
  if (o.tls.serverTls()) {
    out << "  tls:\n    certFile: " << o.tls.certFile << "\n    keyFile: " << o.tls.keyFile
        << "\n    caFile: " << o.tls.caFile << "\n    hostsslOnly: " << (o.tls.hostsslOnly ? "true" : "false")
        << "\n    sslmode: " << o.tls.sslmode << "\n";
  }
  out << "  settings:\n";
  for (const auto& [k, v] : o.settings) {
    if (!options_.clusterWideSettings.count(k)) out << "    " << k << ": \"" << v << "\"\n";
  }
  out << options_.postgresConfig << "http:\n  listen: 127.0.0.1:" << p.httpPort << "\n"
      << options_.httpConfig
      << "singleton: " << (p.singleton ? "true" : "false") << "\n"
      << "health:\n  withdrawAfterSeconds: " << options_.withdrawAfterSeconds << "\n"
      << "log:\n  level: debug\n"
      << options_.extraConfig;
  if (!out) throw std::runtime_error("e2e: cannot write " + p.configPath);
}

int Harness::indexOf(const std::string& id) const {
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

void Harness::startAgent(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid > 0) throw std::runtime_error("e2e: agent " + p.id + " is already running");
  std::vector<std::string> args = {DUGONG_AGENT_BINARY, "--config", p.configPath};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int relayFd = -1;
  if (options_.agentLogsThroughPipes) {
    relays_.resize(peers_.size());
    auto& relay = relays_.at(static_cast<size_t>(i));
    if (!relay) relay = std::make_unique<LogRelay>(p.logPath);
    relayFd = relay->writeFd();
  }
  const int netns = options_.agentNetns ? options_.agentNetns(i) : -1;
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("e2e: fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (netns >= 0 && ::setns(netns, CLONE_NEWNET) != 0) ::_exit(126);
    int fd = relayFd >= 0 ? relayFd : ::open(p.logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  p.agentPid = pid;
}

void Harness::startAll() {
  for (int i = 0; i < size(); ++i) startAgent(i);
}

void Harness::stopAgent(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid <= 0) return;
  ::kill(p.agentPid, SIGCONT);
  ::kill(p.agentPid, SIGTERM);
  waitPid(p.agentPid, 60s);
  p.agentPid = -1;
}

void Harness::killAgent(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid <= 0) return;
  ::kill(p.agentPid, SIGKILL);
  ::waitpid(p.agentPid, nullptr, 0);
  p.agentPid = -1;
}

void Harness::killAgentAndWatchdog(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid <= 0) return;
  // The watchdog is the agent's child named dugong-watchdog: its /proc stat says
  // "<pid> (dugong-watchdog) <state> <ppid> ...".
  const std::string agentPid = std::to_string(p.agentPid);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state, ppid;
    if (stat >> pid >> comm >> state >> ppid && comm == "(dugong-watchdog)" && ppid == agentPid) {
      ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
    }
  }
  killAgent(i);
}

int Harness::leaveAgent(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid > 0) throw std::runtime_error("e2e: agent " + p.id + " still runs: stop it before --leave");
  std::vector<std::string> args = {DUGONG_AGENT_BINARY, "--config", p.configPath, "--leave"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("e2e: fork failed");
  if (pid == 0) {
    int fd = ::open(p.logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void Harness::stallAgentLog(int i) {
  if (static_cast<size_t>(i) >= relays_.size() || !relays_[static_cast<size_t>(i)]) {
    throw std::runtime_error("e2e: agent " + peer(i).id + " does not log through a pipe (agentLogsThroughPipes)");
  }
  relays_[static_cast<size_t>(i)]->stall();
}

void Harness::resumeAgentLog(int i) {
  if (static_cast<size_t>(i) < relays_.size() && relays_[static_cast<size_t>(i)]) {
    relays_[static_cast<size_t>(i)]->resume();
  }
}

void Harness::pauseAgent(int i) { ::kill(peer(i).agentPid, SIGSTOP); }
void Harness::resumeAgent(int i) { ::kill(peer(i).agentPid, SIGCONT); }
void Harness::killPostgres(int i) { peer(i).pg->signalPostmaster(SIGKILL); }

bool Harness::agentRunning(int i) {
  E2EPeer& p = peer(i);
  if (p.agentPid <= 0) return false;
  if (::waitpid(p.agentPid, nullptr, WNOHANG) == p.agentPid) {
    p.agentPid = -1;
    return false;
  }
  return true;
}

std::optional<nlohmann::json> Harness::status(int i) {
  auto r = agent::httpGet("http://127.0.0.1:" + std::to_string(peer(i).httpPort) + "/state", 2s);
  if (!r || r->status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

int Harness::httpStatus(int i, const std::string& path) {
  auto r = agent::httpGet("http://127.0.0.1:" + std::to_string(peer(i).httpPort) + path, 2s);
  return r ? r->status : 0;
}

std::string Harness::role(int i) {
  auto s = status(i);
  return s ? (*s)["peer"]["role"].get<std::string>() : "";
}

bool Harness::reconnectClient() {
  auto client = zk::Client::connect(zkOptions(), 20s);
  if (!client) return false;
  client_ = std::move(client).value();
  return true;
}

std::optional<ClusterState> Harness::zkState(ClusterState::Formats formats) {
  auto node = client_->readState();
  if (!node && reconnectClient()) node = client_->readState();
  if (!node || !node->exists) return std::nullopt;
  auto s = ClusterState::parse(node->data, formats);
  if (!s) return std::nullopt;
  return s.value();
}

std::string Harness::zkStateText() {
  auto node = client_->readState();
  return node && node->exists ? node->data : "none";
}

std::vector<zk::HistoryEntry> Harness::history() {
  auto h = client_->history();
  if (!h && reconnectClient()) h = client_->history();
  return h ? h.value() : std::vector<zk::HistoryEntry>{};
}

bool Harness::updateState(const std::function<void(ClusterState&)>& change) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto node = client_->readState();
    if (!node && reconnectClient()) node = client_->readState();
    if (!node || !node->exists) return false;
    auto s = ClusterState::parse(node->data);
    if (!s) return false;
    ClusterState next = s.value();
    change(next);
    auto r = client_->putState(next, node->version, "e2e test");
    if (r.ok) return true;
    if (!r.lostRace) std::this_thread::sleep_for(200ms);
  }
  return false;
}

bool Harness::waitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(100ms);
  }
}

int Harness::writablePrimary() {
  for (int i = 0; i < size(); ++i) {
    if (peer(i).agentPid > 0 && httpStatus(i, "/primary") == 200) return i;
  }
  return -1;
}

int Harness::waitForHealthyCluster(int replicas, std::chrono::milliseconds timeout) {
  int primary = -1;
  // The primary is asked again after the replicas, within the same look: one that
  // stopped its writes meanwhile (e.g. a failsafe's new session right after a quorum
  // loss) is looked at again rather than failing the wait.
  const bool healthy = waitFor(
      [&] {
        primary = writablePrimary();
        if (primary < 0) return false;
        int streaming = 0;
        for (int i = 0; i < size(); ++i) {
          if (peer(i).agentPid > 0 && httpStatus(i, "/replica") == 200) ++streaming;
        }
        return streaming >= replicas && writablePrimary() == primary;
      },
      timeout);
  return healthy ? primary : -1;
}

int Harness::indexWithRole(const std::string& role) {
  auto s = zkState();
  if (!s) return -1;
  for (int i = 0; i < size(); ++i) {
    const std::string& id = peer(i).id;
    const std::string r = s->primary.id == id             ? "primary"
                          : s->sync && s->sync->id == id  ? "sync"
                          : containsPeer(s->async, id)   ? "async"
                          : containsPeer(s->deposed, id) ? "deposed"
                                                         : "none";
    if (r == role) return i;
  }
  return -1;
}

std::set<int> Harness::intColumn(int i, const std::string& query) {
  std::set<int> out;
  auto r = sql(i, query);
  if (r) {
    for (const auto& row : r->rows) out.insert(std::stoi(row[0].value_or("0")));
  }
  return out;
}

Result<pg::QueryResult> Harness::sql(int i, const std::string& query, std::chrono::milliseconds timeout) {
  return peer(i).pg->sql(query, timeout);
}

std::string Harness::multiHostConninfo() const {
  std::string hosts, ports;
  for (const auto& p : peers_) {
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1");
    ports += (ports.empty() ? "" : ",") + std::to_string(p.pg->port);
  }
  std::string password = peers_.empty() ? "" : peers_[0].pg->options.superuserPassword.value_or("");
  return "host=" + hosts + " port=" + ports +
         " user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=2 " +
         pg::buildConninfo({{"password", password}});
}

namespace {
std::string fileTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::ostringstream out;
  for (size_t k = all.size() > lines ? all.size() - lines : 0; k < all.size(); ++k) out << all[k] << "\n";
  return out.str();
}
}  // namespace

std::string Harness::logTail(int i, size_t lines) const {
  return fileTail(peers_.at(static_cast<size_t>(i)).logPath, lines);
}

std::string Harness::describe() {
  std::ostringstream out;
  auto s = zkState();
  out << "cluster state: " << (s ? s->toJson().dump() : std::string("none")) << "\n";
  for (int i = 0; i < size(); ++i) {
    out << "--- " << peer(i).id << " (agent " << (agentRunning(i) ? "running" : "stopped") << ", role "
        << role(i) << ") last log lines:\n"
        << logTail(i, 25) << "--- " << peer(i).id << " postgres log, last lines:\n"
        << fileTail(peer(i).pg->options.logPath(), 12);
  }
  return out.str();
}

}  // namespace dugong::e2e
