// One ZooKeeper server for every cluster test of a ctest run (the ctest fixture
// `zookeeper`, tests/e2e/CMakeLists.txt), instead of a JVM started per test case.
//
// `dugong-test-zookeeper start DIR` (the fixture's setup) forks a keeper that starts a
// standalone server (ZooKeeperCluster, default options), writes its connect string to
// DIR/connect and its own pid to DIR/pid, and returns once the server serves. The keeper
// stops the server when `dugong-test-zookeeper stop DIR` (the fixture's cleanup, which
// ctest runs also after failed tests) asks it to, or when the process that ran `start`
// (ctest) is gone: a killed ctest leaves no JVM behind. A killed keeper takes its server
// with it (the server gets SIGKILL when its parent dies).
//
// A cluster test finds the server through the environment variable
// DUGONG_CLUSTER_FIXTURES=FIXTURES (set by the CMake stanza of every cluster test; DIR is
// FIXTURES/zookeeper) and works under a chroot of its own (tests/e2e/cluster_harness.cc).
// Run by hand, without the variable, a test starts its own server as before.
#pragma once

#include <optional>
#include <string>

#include "tests/support/test_env.h"

namespace dugong::testing {

// The shared server's connect string, or nullopt when DUGONG_CLUSTER_FIXTURES is not set.
// Throws std::runtime_error when it is set but names no running server.
std::optional<std::string> sharedZooKeeperConnect();

// The fixture's commands; each returns the process' exit status.
int startSharedZooKeeper(const std::string& dir);
int stopSharedZooKeeper(const std::string& dir);

}  // namespace dugong::testing
