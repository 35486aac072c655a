// How long from a server-side session expiry to the adapter's fresh ZkInitialized?
//
// Starts a standalone ZooKeeper, runs one Session, then repeatedly closes its session
// from a second handle (same id and password), which expires it on the server at once,
// and measures until the Session delivered its next ZkInitialized (new session, new
// election node, everything re-read). Default options (back-off starts at 100 ms).
//
//   zk_expiry_bench [rounds=20] [sessionTimeoutMs=4000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <spdlog/spdlog.h>

#include "zk/client.h"
#include "zk/session.h"
#include "zk/testing/zookeeper_server.h"

using namespace dugong;
using Clock = std::chrono::steady_clock;

namespace {

bool runUntil(boost::asio::io_context& io, const std::function<bool()>& pred, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto work = boost::asio::make_work_guard(io);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  int timeoutMs = argc > 2 ? std::atoi(argv[2]) : 4000;
  spdlog::set_level(std::getenv("BENCH_DEBUG") ? spdlog::level::debug : spdlog::level::warn);
  auto zk = testing::ZooKeeperCluster::standalone();

  boost::asio::io_context io;
  zk::ZkOptions options;
  options.connectString = zk->connectString();
  options.cluster = "bench";
  options.sessionTimeoutMs = timeoutMs;
  PeerIdentity self{"bench-peer", "127.0.0.1", "tcp://postgres@127.0.0.1:5432/postgres", "z1", {}};
  int inits = 0;
  Clock::time_point lastInit;
  zk::Session session(io, options, self, [&](Event e) {
    if (std::holds_alternative<ZkInitialized>(e)) {
      ++inits;
      lastInit = Clock::now();
    }
  });
  if (auto started = session.start(); !started) {
    std::fprintf(stderr, "start: %s\n", started.error().c_str());
    return 1;
  }
  if (!runUntil(io, [&] { return inits == 1; }, std::chrono::seconds(30))) {
    std::fprintf(stderr, "no first init\n");
    return 1;
  }

  std::vector<double> ms;    // close acknowledged -> fresh init
  std::vector<double> told;  // the client told of the expiry -> fresh init
  for (int r = 0; r < rounds; ++r) {
    auto creds = session.credentials();
    if (!creds) {
      std::fprintf(stderr, "no credentials\n");
      return 1;
    }
    int before = inits;
    // Close from another thread while the io_context keeps running here.
    auto closing = std::async(std::launch::async, [&] {
      return zk::closeSessionFromOutside(zk->connectString(), creds->sessionId, creds->password);
    });
    if (!runUntil(io, [&] {
          return closing.wait_for(std::chrono::seconds(0)) == std::future_status::ready && inits >= before + 1;
        }, std::chrono::seconds(60))) {
      std::fprintf(stderr, "no fresh init in round %d\n", r);
      return 1;
    }
    auto closed = closing.get();
    if (!closed) {
      std::fprintf(stderr, "close: %s\n", closed.error().c_str());
      return 1;
    }
    if (inits != before + 1) {
      std::fprintf(stderr, "more than one init in round %d\n", r);
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(lastInit - closed.value()).count());
    told.push_back(std::chrono::duration<double, std::milli>(lastInit - session.status().lastSessionLost).count());
  }
  auto report = [&](const char* what, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))]; };
    std::printf("%s: min %.1f ms, median %.1f ms, p90 %.1f ms, max %.1f ms\n", what, v.front(), pct(0.5), pct(0.9),
                v.back());
  };
  std::printf("%d rounds, session timeout %d ms, first reopen back-off %d..%d ms\n", rounds, timeoutMs,
              options.backoffInitialMs / 2, options.backoffInitialMs);
  report("server closed the session -> fresh ZkInitialized", ms);
  report("client told of the expiry  -> fresh ZkInitialized", told);
  return 0;
}
