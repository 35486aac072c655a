// The ZooKeeper server a ctest run shares (shared_zookeeper.h): `dugong-test-zookeeper
// start` leaves a server that serves, `stop` ends it, and so does the end of the process
// that ran `start` (a killed ctest leaves no JVM behind).
#include "zk/testing/shared_zookeeper.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/test_env.h"
#include "zk/client.h"

namespace dugong::testing {
namespace {

using namespace std::chrono_literals;

bool holdsWithin(const std::function<bool()>& condition, std::chrono::milliseconds bound) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

// Runs the fixture program as a child of this process, as ctest runs it: `start` keeps
// the server until the process that ran it (its parent) is gone, so never through a
// shell that exits at once (std::system's /bin/sh may fork instead of exec).
int runFixtureCommand(const std::string& command, const std::string& dir) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    const int devNull = ::open("/dev/null", O_WRONLY);
    if (devNull >= 0) ::dup2(devNull, STDOUT_FILENO);
    ::execl(DUGONG_TEST_ZOOKEEPER_BINARY, DUGONG_TEST_ZOOKEEPER_BINARY, command.c_str(), dir.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t keeperPid(const std::string& dir) {
  std::ifstream in(dir + "/pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// A client of the server makes a chroot of its own, as the e2e harness does.
bool serverAnswers(const std::string& connect, const std::string& chroot) {
  zk::ZkOptions o;
  o.connectString = connect;
  o.root = chroot;
  o.sessionTimeoutMs = 2000;
  auto client = zk::Client::connect(o, 5s);
  return client.ok() && client.value()->ensureLayout().ok();
}

class SharedZooKeeper : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv(kClusterFixturesVariable, fixtures_.path().c_str(), 1); }
  void TearDown() override {
    runFixtureCommand("stop", dir_);
    ::unsetenv(kClusterFixturesVariable);
  }
  ScratchDir fixtures_{"dugong-shared-zk"};
  const std::string dir_ = fixtures_.path() + "/zookeeper";
};

TEST_F(SharedZooKeeper, StartLeavesAServerThatServesUntilStop) {
  ASSERT_EQ(runFixtureCommand("start", dir_), 0);
  const auto connect = sharedZooKeeperConnect();
  ASSERT_TRUE(connect.has_value());
  EXPECT_TRUE(serverAnswers(*connect, "/case-1"));
  EXPECT_TRUE(serverAnswers(*connect, "/case-2"));
  const pid_t keeper = keeperPid(dir_);
  ASSERT_GT(keeper, 0);
  EXPECT_EQ(runFixtureCommand("stop", dir_), 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/pid")) << "the keeper " << keeper << " did not end";
  EXPECT_THROW(sharedZooKeeperConnect(), std::runtime_error) << "no server runs: a test must not start on none";
  EXPECT_FALSE(serverAnswers(*connect, "/case-3"));
}

TEST_F(SharedZooKeeper, TheServerEndsWithTheProcessThatStartedIt) {
  // A shell (the "ctest") runs `start`, then waits; it is killed.
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    ::setpgid(0, 0);
    const std::string script =
        std::string(DUGONG_TEST_ZOOKEEPER_BINARY) + " start " + dir_ + " >/dev/null && exec sleep 600";
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(holdsWithin([&] { return keeperPid(dir_) > 0; }, 90s));
  const auto connect = sharedZooKeeperConnect();
  ASSERT_TRUE(connect.has_value());
  ASSERT_TRUE(serverAnswers(*connect, "/case-1"));
  ::kill(-owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  EXPECT_TRUE(holdsWithin([&] { return !std::filesystem::exists(dir_ + "/pid"); }, 60s))
      << "the keeper runs on without the process that started it";
  EXPECT_FALSE(serverAnswers(*connect, "/case-2"));
}

TEST(SharedZooKeeperVariable, UnsetMeansEachTestStartsItsOwn) {
  ::unsetenv(kClusterFixturesVariable);
  EXPECT_FALSE(sharedZooKeeperConnect().has_value());
}

}  // namespace
}  // namespace dugong::testing
