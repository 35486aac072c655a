// End-to-end: hooks.onRoleChange, onStart and onStop on three real agents (real
// ZooKeeper, real postgres, scram passwords) through a failover. Every peer's hooks
// append their arguments and DUGONG_* environment to a file of the peer's own; the
// records must show the start, each role change of the cluster's setup and of the
// failover, in order, with the right previous role, cluster and generation, and the
// stop of an agent stopped by SIGTERM.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

// One call of the hook as the recorder wrote it.
struct HookCall {
  std::string event;  // DUGONG_EVENT
  int argc = 0;
  std::string role, previous, cluster, generation;                      // $1..$4
  std::string envRole, envPrevious, envCluster, envGeneration, envPeer, envPostgres;  // DUGONG_*
};

// The recorder: a shell script (the hook itself runs without a shell; its interpreter
// is its own business) that appends one '|'-separated line per call.
std::string writeRecorder(const std::string& dir) {
  const std::string path = dir + "/record-hook.sh";
  std::ofstream out(path);
  out << "#!/bin/sh\n"
         "printf '%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\\n' \"$DUGONG_EVENT\" \"$#\" \"$1\" \"$2\" \"$3\" \"$4\" "
         "\"$DUGONG_ROLE\" \"$DUGONG_PREVIOUS_ROLE\" \"$DUGONG_CLUSTER\" \"$DUGONG_GENERATION\" \"$DUGONG_PEER\" "
         "\"$DUGONG_POSTGRES\" >> "
      << dir << "/hook-calls\n";
  out.close();
  ::chmod(path.c_str(), 0755);
  return path;
}

// Every call, or only those of one event ("roleChange", "start", "stop").
std::vector<HookCall> readCalls(const std::string& dir, const std::string& event = "") {
  std::vector<HookCall> calls;
  std::ifstream in(dir + "/hook-calls");
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, '|');) f.push_back(field);
    while (f.size() < 12) f.emplace_back();
    HookCall c;
    c.event = f[0];
    c.argc = std::atoi(f[1].c_str());
    c.role = f[2], c.previous = f[3], c.cluster = f[4], c.generation = f[5];
    c.envRole = f[6], c.envPrevious = f[7], c.envCluster = f[8], c.envGeneration = f[9], c.envPeer = f[10];
    c.envPostgres = f[11];
    if (event.empty() || c.event == event) calls.push_back(c);
  }
  return calls;
}

std::string describe(const std::vector<HookCall>& calls) {
  std::string out;
  for (const auto& c : calls) {
    out += "  " + c.event + ": " + c.role + " " + c.previous + " " + c.cluster + " " + c.generation + "\n";
  }
  return out.empty() ? "  (none)\n" : out;
}

// The role a peer's hook calls end with ("" before the first call).
std::string lastRole(const std::string& dir) {
  auto calls = readCalls(dir, "roleChange");
  return calls.empty() ? "" : calls.back().role;
}

TEST(HooksE2E, EveryRoleChangeOfAFailoverReachesEachPeersHookInOrder) {
  HarnessOptions o;
  o.sessionTimeoutMs = 2000;
  Harness h(o);
  for (int i = 0; i < h.size(); ++i) {
    const std::string hook = writeRecorder(h.peer(i).pg->dir);
    std::ofstream(h.peer(i).configPath, std::ios::app)
        << "hooks:\n  onRoleChange: " << hook << "\n  onStart: " << hook << "\n  onStop: " << hook
        << "\n  timeoutSeconds: 10\n";
  }
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, 180s);
  ASSERT_GE(primary, 0) << h.describe();
  const int sync = h.indexWithRole("sync");
  const int async = h.indexWithRole("async");
  ASSERT_GE(sync, 0);
  ASSERT_GE(async, 0);
  const int64_t setupGeneration = h.zkState()->generation;
  // The hooks run after the transition, on their own thread: wait until each has seen
  // the peer's current role.
  const std::map<int, std::string> before = {{primary, "primary"}, {sync, "sync"}, {async, "async"}};
  for (const auto& [i, role] : before) {
    ASSERT_TRUE(h.waitFor([&, i = i, role = role] { return lastRole(h.peer(i).pg->dir) == role; }, 30s))
        << h.peer(i).id << " hook calls:\n" << describe(readCalls(h.peer(i).pg->dir));
  }

  h.killAgent(primary);
  h.killPostgres(primary);
  ASSERT_TRUE(h.waitFor(
      [&] {
        auto s = h.zkState();
        return s && s->primary.id == h.peer(sync).id && s->sync && s->sync->id == h.peer(async).id;
      },
      90s))
      << h.describe();
  ASSERT_TRUE(h.waitFor([&] { return h.writablePrimary() == sync; }, 60s)) << h.describe();
  const int64_t failoverGeneration = h.zkState()->generation;
  EXPECT_GT(failoverGeneration, setupGeneration);
  const std::map<int, std::string> after = {{sync, "primary"}, {async, "sync"}};
  for (const auto& [i, role] : after) {
    ASSERT_TRUE(h.waitFor([&, i = i, role = role] { return lastRole(h.peer(i).pg->dir) == role; }, 30s))
        << h.peer(i).id << " hook calls:\n" << describe(readCalls(h.peer(i).pg->dir));
  }

  for (int i = 0; i < h.size(); ++i) {
    const auto all = readCalls(h.peer(i).pg->dir);
    SCOPED_TRACE(h.peer(i).id + " hook calls:\n" + describe(all));
    // onStart first, with the cluster and the peer.
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all[0].event, "start");
    EXPECT_EQ(all[0].argc, 2);
    EXPECT_EQ(all[0].role, o.cluster);      // $1
    EXPECT_EQ(all[0].previous, h.peer(i).id);  // $2
    EXPECT_EQ(all[0].envPeer, h.peer(i).id);
    const auto calls = readCalls(h.peer(i).pg->dir, "roleChange");
    ASSERT_FALSE(calls.empty());
    std::string previousRole = "unknown";  // the first call after the agent started
    int64_t previousGeneration = 0;
    for (const auto& c : calls) {
      EXPECT_EQ(c.argc, 4);
      // The arguments and the environment say the same.
      EXPECT_EQ(c.envRole, c.role);
      EXPECT_EQ(c.envPrevious, c.previous);
      EXPECT_EQ(c.envCluster, c.cluster);
      EXPECT_EQ(c.envGeneration, c.generation);
      EXPECT_EQ(c.envPeer, h.peer(i).id);
      EXPECT_EQ(c.cluster, o.cluster);
      // In order: each call starts from the role the one before ended in, changes it,
      // and the generation never goes back.
      EXPECT_EQ(c.previous, previousRole);
      EXPECT_NE(c.role, c.previous);
      const int64_t generation = std::atoll(c.generation.c_str());
      EXPECT_GE(generation, previousGeneration);
      // 0 only before the cluster has a state (a newcomer waits unassigned).
      if (c.role != "unassigned") {
        EXPECT_GE(generation, 1);
      }
      previousRole = c.role;
      previousGeneration = generation;
    }
  }
  // The failover's role changes, with the generation the takeover began.
  const auto promoted = readCalls(h.peer(sync).pg->dir, "roleChange").back();
  EXPECT_EQ(promoted.previous, "sync");
  EXPECT_EQ(promoted.role, "primary");
  EXPECT_EQ(promoted.generation, std::to_string(failoverGeneration));
  const auto moved = readCalls(h.peer(async).pg->dir, "roleChange").back();
  EXPECT_EQ(moved.previous, "async");
  EXPECT_EQ(moved.role, "sync");
  EXPECT_EQ(moved.generation, std::to_string(failoverGeneration));
  // The killed primary's last call is the role it held until then.
  const auto deposed = readCalls(h.peer(primary).pg->dir, "roleChange").back();
  EXPECT_EQ(deposed.role, "primary");
  EXPECT_EQ(deposed.generation, std::to_string(setupGeneration));

  // SIGTERM: onStop runs after the peer left ZooKeeper, and the agent waits for it.
  h.stopAgent(async);
  const auto stops = readCalls(h.peer(async).pg->dir, "stop");
  ASSERT_EQ(stops.size(), 1u) << describe(readCalls(h.peer(async).pg->dir));
  EXPECT_EQ(stops[0].argc, 2);
  EXPECT_EQ(stops[0].role, o.cluster);
  EXPECT_EQ(stops[0].previous, h.peer(async).id);
  EXPECT_EQ(stops[0].envPostgres, "running");  // shutdown.stopPostgres is off
  EXPECT_EQ(readCalls(h.peer(async).pg->dir).back().event, "stop");
}

}  // namespace
}  // namespace dugong::e2e
