// A TCP relay for a test: forwards every connection accepted on a listening socket to an
// upstream, each direction on a thread of its own, so that a large transfer on one
// connection (a pg_basebackup's) never holds another back (the same client's second
// connection). Unlike TcpProxy it cannot be cut. Everything stops with the object.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace dugong::testing {

class TcpRelay {
 public:
  // Accepts on `listenFd` (bound and listening; the relay owns it) and opens each
  // upstream connection with `connectUpstream` (a connected socket, or -1: the client's
  // connection is closed).
  TcpRelay(int listenFd, std::function<int()> connectUpstream);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

 private:
  struct Link {
    int client = -1, upstream = -1;
    std::atomic<int> ended{0};  // directions at their end
    std::thread in, out;
  };
  void run();
  static void pump(int from, int to, std::atomic<int>& ended);
  void reapEndedLinks();

  int listenFd_;
  std::function<int()> connectUpstream_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Link>> links_;  // the accepting thread's, then the destructor's
  std::thread thread_;
};

}  // namespace dugong::testing
