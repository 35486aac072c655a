// Debian's real haproxy for tests and benchmarks: the sample etc/haproxy.cfg, rewritten
// to listen on free loopback ports and to name the test's peers, run in the foreground
// from a scratch directory. It is killed when the object is destroyed, also when a test
// fails (and by the kernel if the test process dies first).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "statemachine/result.h"
#include "tests/support/test_env.h"

namespace dugong::ecosystem {

// One peer as HAProxy sees it: its postgres port and its agent's HTTP port, on 127.0.0.1.
struct HaproxyServer {
  std::string name;
  int pgPort = 0;
  int httpPort = 0;
};

// The sample configuration with: the global section reduced to what a foreground run
// needs (no chroot, user, syslog or daemon; a stats socket at `statsSocket`), each "bind" of the
// read-write (dugong_rw), read-only (dugong_ro) and, if present, any-peer (dugong_any)
// sections moved to 127.0.0.1:<port>,
// and each section's "server" lines replaced by `servers`. Every other line (checks,
// intervals, timeouts) is the sample's. An error if a section or line is missing.
Result<std::string> rewriteHaproxyConfig(const std::string& sample, const std::vector<HaproxyServer>& servers,
                                         int writePort, int readPort, const std::string& statsSocket,
                                         int anyPort = 0);

class HaproxyProcess {
 public:
  // REQUIRES: `samplePath` is the sample configuration (etc/haproxy.cfg).
  HaproxyProcess(const std::string& samplePath, std::vector<HaproxyServer> servers);
  ~HaproxyProcess();
  HaproxyProcess(const HaproxyProcess&) = delete;
  HaproxyProcess& operator=(const HaproxyProcess&) = delete;

  // Writes the configuration, checks it with `haproxy -c`, starts haproxy and waits
  // (bounded) until both ports accept connections.
  Result<bool> start();
  // HAProxy's view of each server, from "show stat" on the stats socket:
  // "dugong_rw/peer1" -> "UP", "DOWN", ... Empty if the socket does not answer.
  // HAProxy counts every server as up until its first check, so a test waits for
  // these before it relies on routing.
  std::map<std::string, std::string> serverStatus() const;
  int writePort() const { return writePort_; }
  int readPort() const { return readPort_; }
  int anyPort() const { return anyPort_; }  // dugong_any: GET /read-only
  const std::string& configPath() const { return configPath_; }
  std::string logTail() const;

 private:
  std::string samplePath_;
  std::vector<HaproxyServer> servers_;
  dugong::testing::ScratchDir dir_{"dugong-haproxy"};
  std::string configPath_;
  std::string logPath_;
  std::string statsSocket_;
  int writePort_ = 0;
  int readPort_ = 0;
  int anyPort_ = 0;
  pid_t pid_ = -1;
};

// One client request through a port: connect to 127.0.0.1:<port> as the postgres
// superuser (connect_timeout 2 s, statement_timeout 2 s), run `sql`, and report which
// postgres answered (inet_server_port()) and whether the statement succeeded.
struct ProbeResult {
  bool connected = false;
  bool ok = false;          // the statement succeeded
  int serverPort = 0;       // 0 if not connected
  bool inRecovery = false;  // pg_is_in_recovery() of the server that answered
  std::string error;
};
ProbeResult probeThrough(int port, const std::string& sql);

}  // namespace dugong::ecosystem
