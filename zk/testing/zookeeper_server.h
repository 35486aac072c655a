// Real ZooKeeper servers for tests: a standalone server or an ensemble, on loopback,
// each with its own data directory and free ports, run from Debian's jars
// (/usr/share/java/zookeeper.jar) with `java` directly.
//
// Servers are always stopped: by the destructor, and, should the test process die,
// by the kernel (each server gets SIGKILL when the thread that started it exits; start
// servers from the test's main thread).
//
// Fast settings: tickTime 200 ms, so sessions may be as short as 400 ms; the maximum
// session timeout is raised to 60 s. Four-letter words are all enabled.
//
// Errors (a server that does not start, missing jars) throw std::runtime_error with the
// tail of the server's log: this is test code.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "tests/support/tcp_proxy.h"
#include "tests/support/test_env.h"

namespace dugong::testing {

struct ZooKeeperOptions {
  int servers = 1;  // 1: standalone; 3 (or 5): an ensemble
  int tickTimeMs = 200;
  int maxSessionTimeoutMs = 60000;
  // How long (in ticks) a follower waits for its leader, and the leader for a quorum of
  // followers, before giving up: a follower cut off from its leader answers its clients
  // (pings included) for about this long.
  int syncLimit = 10;
  // Every server reaches the others' quorum and election ports through TCP proxies
  // (tests/support/tcp_proxy.h), so that a test can cut one server off the others
  // (cutQuorumLinks) while its clients still reach it.
  bool cuttableQuorumLinks = false;
  std::chrono::milliseconds startTimeout = std::chrono::seconds(60);

  bool operator==(const ZooKeeperOptions&) const = default;
};

class ZooKeeperCluster {
 public:
  // Starts every server and waits until each serves requests.
  explicit ZooKeeperCluster(ZooKeeperOptions options = {});
  ~ZooKeeperCluster();
  ZooKeeperCluster(const ZooKeeperCluster&) = delete;
  ZooKeeperCluster& operator=(const ZooKeeperCluster&) = delete;

  static std::unique_ptr<ZooKeeperCluster> standalone() { return std::make_unique<ZooKeeperCluster>(); }
  static std::unique_ptr<ZooKeeperCluster> ensemble(int servers = 3) {
    ZooKeeperOptions o;
    o.servers = servers;
    return std::make_unique<ZooKeeperCluster>(o);
  }

  int size() const { return static_cast<int>(servers_.size()); }
  // "127.0.0.1:p1,127.0.0.1:p2,..." (every server) or one server's address.
  std::string connectString() const;
  std::string connectString(int server) const;
  int clientPort(int server) const;
  const std::string& dataDir(int server) const;
  const std::string& logFile(int server) const;

  // Starts a stopped server (same ports, same data) and waits until it serves.
  void start(int server);
  // SIGTERM, then waits for the exit (SIGKILL after 10 s).
  void stop(int server);
  // SIGKILL, and waits for the exit.
  void kill(int server);
  void restart(int server) {
    stop(server);
    start(server);
  }
  // Every server stopped, its data deleted (myid kept), and started again: an ensemble
  // rebuilt empty, whose last zxid is older than any its clients have seen.
  void rebuildEmpty();
  // SIGSTOP / SIGCONT: a server that hangs without closing its connections.
  void pause(int server);
  void resume(int server);
  bool running(int server) const;

  // The server's answer to a four-letter word ("srvr", "mntr", "cons", ...), or an empty
  // string when it does not answer within 2 s.
  std::string fourLetterWord(int server, const std::string& word) const;
  // True when the server answers "srvr" with a mode (it is part of a serving quorum).
  bool serving(int server) const;
  // "leader", "follower", "standalone", or "" when not serving.
  std::string mode(int server) const;
  // The server that leads the ensemble now (the standalone server counts as leader).
  std::optional<int> leader() const;
  // Waits until `server` serves / until some server leads. False on timeout.
  bool waitServing(int server, std::chrono::milliseconds timeout) const;
  std::optional<int> waitLeader(std::chrono::milliseconds timeout) const;

  // With cuttableQuorumLinks: every link between `server` and the other servers cut
  // (nothing forwarded either way, no connection closed), or forwarding again.
  void cutQuorumLinks(int server);
  void healQuorumLinks(int server);

  // The last `lines` lines of a server's log, for failure messages.
  std::string logTail(int server, size_t lines = 30) const;

 private:
  struct Server {
    int id = 0;  // myid, 1-based
    int clientPort = 0;
    int quorumPort = 0;
    int electionPort = 0;
    std::string dir;
    std::string dataDir;
    std::string config;
    std::string log;
    pid_t pid = -1;
  };

  void writeConfig(const Server& s) const;
  void spawn(Server& s);
  void waitExit(Server& s, std::chrono::milliseconds timeout);
  Server& at(int server);
  const Server& at(int server) const;

  // cuttableQuorumLinks: the proxy server `from` uses for server `to`'s quorum and
  // election ports, by (from, to).
  struct Link {
    int from = 0, to = 0;
    std::unique_ptr<TcpProxy> quorum, election;
  };
  std::vector<Link> links_;

  ZooKeeperOptions options_;
  ScratchDir scratch_;
  std::vector<Server> servers_;
};

}  // namespace dugong::testing
