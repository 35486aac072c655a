// A TCP proxy on loopback for partition tests: forwards every connection to one
// upstream address until cut(), then forwards nothing (bytes are read and dropped, no
// connection is closed, new connections are accepted and never answered), as a network
// partition looks to both ends. heal() closes the cut connections and forwards again.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dugong::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 at a free port; throws std::runtime_error on failure.
  TcpProxy(std::string upstreamHost, int upstreamPort);
  // Accepts on `listenFd` (bound and listening; the proxy owns it) and opens each
  // upstream connection with `connectUpstream` (a connected socket, or -1): e.g. a
  // listener and an upstream in two network namespaces (tests/support/net_namespace.h).
  TcpProxy(int listenFd, std::function<int()> connectUpstream);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }  // the listener's
  void cut() { cut_ = true; }
  void heal();

 private:
  struct Link {
    int client = -1, upstream = -1;
  };
  void run();
  void closeLinks();

  std::function<int()> connectUpstream_;
  int listenFd_ = -1;
  int wakeFd_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> cut_{false}, stop_{false}, healRequested_{false};
  std::vector<Link> links_;  // the proxy thread's only
  std::thread thread_;
};

}  // namespace dugong::testing
