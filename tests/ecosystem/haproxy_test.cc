// Debian's haproxy, configured by the sample etc/haproxy.cfg (Patroni-style checks:
// /primary, /replica?lag=16MB, /read-only?lag=16MB), in front of a real 3-peer cluster:
// a replica lagging past the cut-off leaves the read pools and returns; the write port
// follows a failover and never reaches a deposed peer.
#include <gtest/gtest.h>


#include "tests/ecosystem/haproxy_failover.h"
#include "tests/support/test_env.h"

namespace dugong::ecosystem {
namespace {

using namespace std::chrono_literals;

const std::string kSample = DUGONG_SOURCE_DIR "/etc/haproxy.cfg";

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(HaproxyConfig, RewritesTheSampleForLoopbackAndKeepsItsChecks) {
  auto c = rewriteHaproxyConfig(dugong::testing::fileText(kSample), {{"a", 6001, 7001}, {"b", 6002, 7002}}, 5100, 5101, "/x/h.sock",
                                5102);
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string& cfg = c.value();
  EXPECT_NE(cfg.find("bind 127.0.0.1:5100"), std::string::npos);
  EXPECT_NE(cfg.find("bind 127.0.0.1:5101"), std::string::npos);
  EXPECT_NE(cfg.find("bind 127.0.0.1:5102"), std::string::npos);
  EXPECT_NE(cfg.find("option httpchk GET /read-only?lag=16MB"), std::string::npos);
  EXPECT_NE(cfg.find("option httpchk GET /primary"), std::string::npos);
  EXPECT_NE(cfg.find("option httpchk GET /replica?lag=16MB"), std::string::npos);
  EXPECT_NE(cfg.find("server b 127.0.0.1:6002 check port 7002"), std::string::npos);
  EXPECT_EQ(cfg.find("10.0.0."), std::string::npos) << "a sample server line was left: " << cfg;
  EXPECT_EQ(cfg.find("chroot"), std::string::npos);
  EXPECT_NE(cfg.find("stats socket /x/h.sock"), std::string::npos);
  EXPECT_FALSE(rewriteHaproxyConfig("defaults\n    mode tcp\n", {}, 1, 2, "/x/h.sock").ok());
}

TEST(Haproxy, LaggingReplicaLeavesTheReadPoolsAndWritePortFollowsAFailover) {
  e2e::Harness h;  // 3 peers, 3 s session timeout
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, 180s);
  ASSERT_GE(primary, 0) << h.describe();
  HaproxyProcess haproxy(kSample, haproxyServers(h));
  auto started = haproxy.start();
  ASSERT_TRUE(started.ok()) << started.error();

  // HAProxy counts every server as up until its first check: wait for the checks to
  // tell the primary from the replicas.
  ASSERT_TRUE(h.waitFor(
      [&] {
        auto st = haproxy.serverStatus();
        for (int i = 0; i < h.size(); ++i) {
          const bool isPrimary = i == primary;
          if (st["dugong_rw/" + h.peer(i).id] != (isPrimary ? "UP" : "DOWN")) return false;
          if (st["dugong_ro/" + h.peer(i).id] != (isPrimary ? "DOWN" : "UP")) return false;
          if (st["dugong_any/" + h.peer(i).id] != "UP") return false;
        }
        return true;
      },
      30s))
      << haproxy.logTail();

  // The read-only port reaches a streaming replica, never the primary.
  for (int k = 0; k < 4; ++k) {
    const ProbeResult ro = probeThrough(haproxy.readPort(), "");
    ASSERT_TRUE(ro.connected) << ro.error;
    EXPECT_TRUE(ro.inRecovery) << "the read-only port reached port " << ro.serverPort;
  }

  // The async stops replaying while the primary writes about 40 MB: more than the 16 MB
  // cut-off of the read pools' checks, so it leaves both; the sync stays. Once it
  // replays again it comes back.
  const int async = h.indexWithRole("async");
  const int sync = h.indexWithRole("sync");
  ASSERT_GE(async, 0);
  const std::string A = h.peer(async).id, S = h.peer(sync).id;
  EXPECT_EQ(h.httpStatus(async, "/replica?lag=lots"), 400);
  ASSERT_TRUE(h.sql(async, "SELECT pg_wal_replay_pause()").ok());
  ASSERT_TRUE(h.sql(primary, "CREATE TABLE lag_fill AS SELECT g, repeat('x', 600) AS pad FROM generate_series(1, 60000) g",
                    60s)
                  .ok());
  auto poolsAre = [&](const std::string& state) {
    auto st = haproxy.serverStatus();
    return st["dugong_ro/" + A] == state && st["dugong_any/" + A] == state && st["dugong_ro/" + S] == "UP";
  };
  ASSERT_TRUE(h.waitFor([&] { return poolsAre("DOWN"); }, 30s)) << haproxy.logTail();
  EXPECT_EQ(h.httpStatus(async, "/replica"), 200);  // streaming, only behind
  EXPECT_EQ(h.httpStatus(async, "/replica?lag=16MB"), 503);
  for (int k = 0; k < 4; ++k) {
    const ProbeResult ro = probeThrough(haproxy.readPort(), "");
    ASSERT_TRUE(ro.connected) << ro.error;
    EXPECT_EQ(ro.serverPort, h.peer(sync).pg->port) << "the read-only port reached a replica past the cut-off";
  }
  ASSERT_TRUE(h.sql(async, "SELECT pg_wal_replay_resume()").ok());
  ASSERT_TRUE(h.waitFor([&] { return poolsAre("UP"); }, 30s)) << haproxy.logTail();

  // Only the agent dies: the old primary's postgres keeps running, so only the health
  // check keeps clients away from it.
  const auto f = failOverThroughHaproxy(h, primary, haproxy, /*killPostgresToo=*/false, 120s);
  ASSERT_TRUE(f.ok) << f.error << "\n" << h.describe() << haproxy.logTail();
  EXPECT_TRUE(f.violations.empty()) << joined(f.violations);
  const int now = h.writablePrimary();
  ASSERT_GE(now, 0);
  EXPECT_EQ(f.newPort, h.peer(now).pg->port);
  std::cout << "the write port reached the new primary " << f.seconds << " s after the old primary's agent died\n";

  // The deposed peer's agent comes back while its postgres still runs: HAProxy keeps
  // every client away from it and on the new primary.
  h.startAgent(primary);
  ASSERT_TRUE(h.waitFor([&] { return h.role(primary) == "deposed"; }, 60s)) << h.describe();
  int writes = 0;
  const auto violations = writeThroughHaproxy(haproxy, f.oldPort, 4s, &writes);
  EXPECT_TRUE(violations.empty()) << joined(violations);
  EXPECT_GT(writes, 0) << haproxy.logTail();
}

}  // namespace
}  // namespace dugong::ecosystem
