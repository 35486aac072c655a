// How many ZooKeeper requests does a peer make at rest?
//
// Starts a standalone ZooKeeper, runs one initialized Session (with a cluster state
// and a second peer, so both watches are armed), then lets it idle and compares, over
// the window: the requests the adapter issued itself (SessionStatus::requestsSent), and
// what the server counted for that connection (`cons`: packets received, which
// include the client's pings, and the last operation).
//
//   zk_idle_bench [seconds=60] [sessionTimeoutMs=10000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include "zk/c_client.h"
#include "zk/client.h"
#include "zk/session.h"
#include "zk/testing/zookeeper_server.h"

using namespace dugong;
using Clock = std::chrono::steady_clock;

namespace {

struct ConnStats {
  long recved = -1;
  std::string lastOp;
};

ConnStats statsFor(const testing::ZooKeeperCluster& zk, int64_t sessionId) {
  std::string cons = zk.fourLetterWord(0, "cons");
  std::string sid = "sid=" + zk::detail::sessionIdText(sessionId);
  ConnStats out;
  size_t pos = cons.find(sid + ",");
  if (pos == std::string::npos) return out;
  size_t lineStart = cons.rfind('\n', pos);
  std::string line = cons.substr(lineStart == std::string::npos ? 0 : lineStart, cons.find('\n', pos) - lineStart);
  std::smatch m;
  if (std::regex_search(line, m, std::regex("recved=(\\d+)"))) out.recved = std::stol(m[1]);
  if (std::regex_search(line, m, std::regex("lop=(\\w+)"))) out.lastOp = m[1];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = argc > 1 ? std::atoi(argv[1]) : 60;
  int timeoutMs = argc > 2 ? std::atoi(argv[2]) : 10000;
  spdlog::set_level(spdlog::level::warn);
  auto zk = testing::ZooKeeperCluster::standalone();

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);  // run_for waits instead of spinning
  zk::ZkOptions options;
  options.connectString = zk->connectString();
  options.cluster = "bench";
  options.sessionTimeoutMs = timeoutMs;
  int events = 0;
  auto make = [&](const char* id) {
    return std::make_unique<zk::Session>(
        io, options, PeerIdentity{id, "127.0.0.1", "tcp://postgres@127.0.0.1:5432/postgres", "z1", {}},
        [&](Event) { ++events; });
  };
  auto a = make("a");
  auto b = make("b");
  if (!a->start() || !b->start()) return 1;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!(a->status().initialized && b->status().initialized) && Clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(10));
  }
  ClusterState st;
  st.primary = PeerIdentity{"a", "127.0.0.1", "tcp://postgres@127.0.0.1:5432/postgres", "z1", {}};
  st.sync = PeerIdentity{"b", "127.0.0.1", "tcp://postgres@127.0.0.1:5432/postgres", "z1", {}};
  bool written = false;
  a->putClusterState(st, -1, [&](StateWriteFinished f) { written = f.ok; }, "bench");
  deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) io.run_for(std::chrono::milliseconds(50));  // settle: watches fire, re-reads done
  if (!written) {
    std::fprintf(stderr, "setup write failed\n");
    return 1;
  }

  auto sessionId = a->status().sessionId;
  auto server0 = statsFor(*zk, sessionId);
  auto adapter0 = a->status().requestsSent;
  int events0 = events;
  auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(seconds)) io.run_for(std::chrono::milliseconds(100));
  double minutes = std::chrono::duration<double>(Clock::now() - t0).count() / 60.0;
  auto server1 = statsFor(*zk, sessionId);
  auto adapter1 = a->status().requestsSent;

  std::printf("idle window %.1f s, session timeout %d ms (client pings every ~%d ms when idle)\n", minutes * 60,
              timeoutMs, timeoutMs / 3);
  std::printf("adapter requests (excluding pings): %llu in window = %.1f/min\n",
              static_cast<unsigned long long>(adapter1 - adapter0),
              static_cast<double>(adapter1 - adapter0) / minutes);
  std::printf("server packets received from the peer's connection: %ld in window = %.1f/min (last op %s)\n",
              server1.recved - server0.recved, static_cast<double>(server1.recved - server0.recved) / minutes,
              server1.lastOp.c_str());
  std::printf("events delivered while idle: %d\n", events - events0);
  return 0;
}
