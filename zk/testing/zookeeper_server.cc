#include "zk/testing/zookeeper_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dugong::testing {

namespace {

const char* kDefaultClasspath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

std::string classpath() {
  const char* env = std::getenv("DUGONG_ZK_CLASSPATH");
  return env != nullptr && *env ? env : kDefaultClasspath;
}

std::string javaBinary() {
  const char* env = std::getenv("DUGONG_JAVA");
  return env != nullptr && *env ? env : "java";
}

// The tests need Debian's zookeeper package; install it once if it is missing.
void ensureJars() {
  if (std::filesystem::exists("/usr/share/java/zookeeper.jar") || std::getenv("DUGONG_ZK_CLASSPATH")) return;
#ifdef DUGONG_SOURCE_DIR
  std::string cmd = std::string("CI=true ") + DUGONG_SOURCE_DIR + "/scripts/install-deps.sh >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists("/usr/share/java/zookeeper.jar")) {
    throw std::runtime_error("ZooKeeper jars are missing and " + std::string(DUGONG_SOURCE_DIR) +
                             "/scripts/install-deps.sh could not install Debian's zookeeper package");
  }
#else
  throw std::runtime_error("ZooKeeper jars are missing: install Debian's zookeeper package");
#endif
}

int uniquePort(std::set<int>& used) {
  for (int i = 0; i < 100; ++i) {
    int p = freeLoopbackPort();
    if (used.insert(p).second) return p;
  }
  throw std::runtime_error("no free loopback port");
}

}  // namespace

ZooKeeperCluster::ZooKeeperCluster(ZooKeeperOptions options) : options_(options), scratch_("dugong-zk") {
  if (options_.servers < 1) throw std::invalid_argument("ZooKeeperCluster: servers must be >= 1");
  ensureJars();
  std::set<int> used;
  for (int i = 0; i < options_.servers; ++i) {
    Server s;
    s.id = i + 1;
    s.clientPort = uniquePort(used);
    s.quorumPort = uniquePort(used);
    s.electionPort = uniquePort(used);
    s.dir = scratch_.path() + "/server" + std::to_string(s.id);
    s.dataDir = s.dir + "/data";
    s.config = s.dir + "/zoo.cfg";
    s.log = s.dir + "/server.log";
    std::filesystem::create_directories(s.dataDir);
    servers_.push_back(s);
  }
  if (options_.cuttableQuorumLinks) {
    for (const auto& from : servers_) {
      for (const auto& to : servers_) {
        if (from.id == to.id) continue;
        links_.push_back(Link{from.id, to.id, std::make_unique<TcpProxy>("127.0.0.1", to.quorumPort),
                              std::make_unique<TcpProxy>("127.0.0.1", to.electionPort)});
      }
    }
  }
  for (auto& s : servers_) writeConfig(s);
  for (auto& s : servers_) spawn(s);
  for (int i = 0; i < size(); ++i) {
    if (!waitServing(i, options_.startTimeout)) {
      std::string tail = logTail(i);
      for (auto& s : servers_) {
        if (s.pid > 0) {
          ::kill(s.pid, SIGKILL);
          waitExit(s, std::chrono::seconds(10));
        }
      }
      throw std::runtime_error("ZooKeeper server " + std::to_string(i) + " did not start serving; log:\n" + tail);
    }
  }
}

ZooKeeperCluster::~ZooKeeperCluster() {
  for (auto& s : servers_) {
    if (s.pid <= 0) continue;
    ::kill(s.pid, SIGCONT);
    ::kill(s.pid, SIGKILL);
  }
  for (auto& s : servers_) {
    if (s.pid > 0) waitExit(s, std::chrono::seconds(10));
  }
}

void ZooKeeperCluster::writeConfig(const Server& s) const {
  std::ofstream out(s.config);
  out << "tickTime=" << options_.tickTimeMs << "\n"
      << "initLimit=20\nsyncLimit=" << options_.syncLimit << "\n"
      << "dataDir=" << s.dataDir << "\n"
      << "clientPort=" << s.clientPort << "\n"
      << "clientPortAddress=127.0.0.1\n"
      << "maxSessionTimeout=" << options_.maxSessionTimeoutMs << "\n"
      << "4lw.commands.whitelist=*\n"
      << "admin.enableServer=false\n"
      << "forceSync=no\n"
      << "maxClientCnxns=0\n";
  if (servers_.size() > 1) {
    for (const auto& peer : servers_) {
      int quorum = peer.quorumPort, election = peer.electionPort;
      for (const auto& l : links_) {
        if (l.from == s.id && l.to == peer.id) {
          quorum = l.quorum->port();
          election = l.election->port();
        }
      }
      out << "server." << peer.id << "=127.0.0.1:" << quorum << ":" << election << "\n";
    }
    std::ofstream(s.dataDir + "/myid") << s.id << "\n";
  }
  if (!out) throw std::runtime_error("cannot write " + s.config);
}

void ZooKeeperCluster::cutQuorumLinks(int server) {
  for (auto& l : links_) {
    if (l.from == server + 1 || l.to == server + 1) {
      l.quorum->cut();
      l.election->cut();
    }
  }
}

void ZooKeeperCluster::healQuorumLinks(int server) {
  for (auto& l : links_) {
    if (l.from == server + 1 || l.to == server + 1) {
      l.quorum->heal();
      l.election->heal();
    }
  }
}

void ZooKeeperCluster::spawn(Server& s) {
  std::vector<std::string> args = {javaBinary(),
                                   "-Xmx128m",
                                   "-Xss512k",
                                   "-XX:+UseSerialGC",
                                   "-XX:TieredStopAtLevel=1",
                                   "-Djava.awt.headless=true",
                                   "-Dzookeeper.admin.enableServer=false",
                                   "-Dorg.slf4j.simpleLogger.showDateTime=true",
                                   "-cp",
                                   classpath(),
                                   "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                   s.config};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int logFd = ::open(s.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (logFd < 0) throw std::runtime_error("cannot open " + s.log);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(logFd);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(logFd, 1);
    ::dup2(logFd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(logFd);
  s.pid = pid;
}

void ZooKeeperCluster::waitExit(Server& s, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (s.pid > 0) {
    int status = 0;
    pid_t r = ::waitpid(s.pid, &status, WNOHANG);
    if (r == s.pid || (r < 0 && errno == ECHILD)) {
      s.pid = -1;
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(s.pid, SIGKILL);
      ::waitpid(s.pid, &status, 0);
      s.pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ZooKeeperCluster::Server& ZooKeeperCluster::at(int server) {
  if (server < 0 || server >= size()) throw std::out_of_range("no ZooKeeper server " + std::to_string(server));
  return servers_[static_cast<size_t>(server)];
}

const ZooKeeperCluster::Server& ZooKeeperCluster::at(int server) const {
  if (server < 0 || server >= size()) throw std::out_of_range("no ZooKeeper server " + std::to_string(server));
  return servers_[static_cast<size_t>(server)];
}

std::string ZooKeeperCluster::connectString() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    if (i > 0) out += ",";
    out += connectString(i);
  }
  return out;
}

std::string ZooKeeperCluster::connectString(int server) const {
  return "127.0.0.1:" + std::to_string(at(server).clientPort);
}

int ZooKeeperCluster::clientPort(int server) const { return at(server).clientPort; }
const std::string& ZooKeeperCluster::dataDir(int server) const { return at(server).dataDir; }
const std::string& ZooKeeperCluster::logFile(int server) const { return at(server).log; }

void ZooKeeperCluster::start(int server) {
  Server& s = at(server);
  if (s.pid > 0) return;
  spawn(s);
  if (!waitServing(server, options_.startTimeout)) {
    throw std::runtime_error("ZooKeeper server " + std::to_string(server) + " did not start serving; log:\n" +
                             logTail(server));
  }
}

void ZooKeeperCluster::stop(int server) {
  Server& s = at(server);
  if (s.pid <= 0) return;
  ::kill(s.pid, SIGCONT);
  ::kill(s.pid, SIGTERM);
  waitExit(s, std::chrono::seconds(10));
}

void ZooKeeperCluster::rebuildEmpty() {
  for (int i = 0; i < size(); ++i) stop(i);
  for (const auto& s : servers_) {
    for (const auto& entry : std::filesystem::directory_iterator(s.dataDir)) {
      if (entry.path().filename() != "myid") std::filesystem::remove_all(entry.path());
    }
  }
  for (auto& s : servers_) spawn(s);
  for (int i = 0; i < size(); ++i) {
    if (!waitServing(i, options_.startTimeout)) {
      throw std::runtime_error("ZooKeeper server " + std::to_string(i) + " did not serve after the rebuild; log:\n" +
                               logTail(i));
    }
  }
}

void ZooKeeperCluster::kill(int server) {
  Server& s = at(server);
  if (s.pid <= 0) return;
  ::kill(s.pid, SIGKILL);
  waitExit(s, std::chrono::seconds(10));
}

void ZooKeeperCluster::pause(int server) {
  if (at(server).pid > 0) ::kill(at(server).pid, SIGSTOP);
}

void ZooKeeperCluster::resume(int server) {
  if (at(server).pid > 0) ::kill(at(server).pid, SIGCONT);
}

bool ZooKeeperCluster::running(int server) const { return at(server).pid > 0; }

std::string ZooKeeperCluster::fourLetterWord(int server, const std::string& word) const {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(at(server).clientPort));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, word.data(), word.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(word.size())) {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

std::string ZooKeeperCluster::mode(int server) const {
  if (!running(server)) return "";
  std::string srvr = fourLetterWord(server, "srvr");
  auto pos = srvr.find("Mode: ");
  if (pos == std::string::npos) return "";
  auto end = srvr.find('\n', pos);
  return srvr.substr(pos + 6, end == std::string::npos ? std::string::npos : end - pos - 6);
}

bool ZooKeeperCluster::serving(int server) const { return !mode(server).empty(); }

std::optional<int> ZooKeeperCluster::leader() const {
  for (int i = 0; i < size(); ++i) {
    std::string m = mode(i);
    if (m == "leader" || m == "standalone") return i;
  }
  return std::nullopt;
}

bool ZooKeeperCluster::waitServing(int server, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running(server)) return false;
    if (serving(server)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::optional<int> ZooKeeperCluster::waitLeader(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto l = leader()) return l;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

std::string ZooKeeperCluster::logTail(int server, size_t lines) const {
  std::ifstream in(at(server).log);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (auto& l : tail) out += l + "\n";
  return out;
}

}  // namespace dugong::testing
