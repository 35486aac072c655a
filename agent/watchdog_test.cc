#include "agent/watchdog.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "agent/process_stamp.h"
#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

// Session timeout 6000 ms: limit 3000, polled every 1500.
TEST(WatchdogDeadline, AStoppedAgentsPostgresIsShutDownALimitAfterTheStopBegan) {
  EXPECT_EQ(watchdogDeadlineMs(10000, 1500, 3000, std::nullopt), 11500);
}

// The connection was lost as primary at 4000, the agent died at
// 8500 before its own shutdown (due at 5000) and was seen gone at 9000; the session
// could expire from 10000 on. The shutdown is due at once, not at 10500.
TEST(WatchdogDeadline, AfterAConnectionLostAsPrimaryItIsDueWhenTheAgentWouldHaveShutDown) {
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 4000), 5000);
  // A loss just before the stop: still the earlier of the two.
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 8900), 9900);
  EXPECT_EQ(watchdogDeadlineMs(9000, 1500, 3000, 9900), 10500);
}

// A stand-in for postgres: a child that sleeps until signalled, named in
// <dir>/postmaster.pid as a postmaster is.
pid_t fakePostmaster(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::ofstream(dir + "/postmaster.pid") << pid << "\n" << dir << "\n";
  return pid;
}

// An agent that runs as the primary and then stops cleanly with postgres running on:
// it writes its watchdog's stamp to `out` and exits.
pid_t agentStoppedAsPrimary(const std::string& dataDir, std::chrono::milliseconds limit, int out) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 1;
  {
    auto watchdog = Watchdog::start(dataDir, limit);
    if (watchdog) {
      (*watchdog)->setPrimary(true);
      (*watchdog)->leaveArmed();
      const auto stamp = processStamp((*watchdog)->pid());
      const std::string text = stamp ? stamp->text() : "";
      code = ::write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 1;
    }
  }  // the watchdog's destructor: it must leave the process running
  ::_exit(code);
}

// Waits (bounded, for a broken build only) for child `pid` to end; its wait status.
std::optional<int> waitForChild(pid_t pid, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    ::usleep(20000);
  }
  return std::nullopt;
}

// Waits for the fake postmaster to be signalled (its wait status), or kills it.
std::optional<int> waitForPostmaster(pid_t postmaster) {
  auto status = waitForChild(postmaster, std::chrono::seconds(60));
  if (!status) {
    ::kill(postmaster, SIGKILL);
    ::waitpid(postmaster, nullptr, 0);
  }
  return status;
}

// A clean stop disarmed the watchdog, so a primary's postgres
// ran on, writable, after the session expired and the sync took over.
TEST(Watchdog, LeftArmedByAPrimaryThatStoppedItShutsPostgresDownOnceTheAgentIsGone) {
  dugong::testing::ScratchDir dir{"watchdog-left-armed"};
  const pid_t postmaster = fakePostmaster(dir.path());
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  const pid_t agent = agentStoppedAsPrimary(dir.path(), std::chrono::milliseconds(200), pipeFds[1]);
  ::close(pipeFds[1]);
  auto agentStatus = waitForChild(agent, std::chrono::seconds(30));
  ASSERT_TRUE(agentStatus && WIFEXITED(*agentStatus) && WEXITSTATUS(*agentStatus) == 0);
  ::close(pipeFds[0]);
  auto status = waitForPostmaster(postmaster);
  ASSERT_TRUE(status.has_value()) << "the watchdog left armed never shut postgres down";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGINT);  // a fast shutdown
}

// The agent's next run ends the watchdog its predecessor left armed (here at once, before
// it acts), so that it never shuts down the postgres the new run serves.
TEST(Watchdog, LeftArmedItIsEndedByTheNextRunThroughItsStamp) {
  dugong::testing::ScratchDir dir{"watchdog-ended"};
  const pid_t postmaster = fakePostmaster(dir.path());
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  // A limit far longer than the test: the watchdog is ended before it could act.
  const pid_t agent = agentStoppedAsPrimary(dir.path(), std::chrono::minutes(10), pipeFds[1]);
  ::close(pipeFds[1]);
  char buf[64] = {};
  const ssize_t n = ::read(pipeFds[0], buf, sizeof(buf) - 1);
  ::close(pipeFds[0]);
  ASSERT_GT(n, 0);
  auto stamp = parseProcessStamp(std::string(buf, static_cast<size_t>(n)));
  ASSERT_TRUE(stamp.has_value()) << buf;
  EXPECT_TRUE(endProcess(*stamp, SIGKILL, std::chrono::seconds(30)));
  auto left = processStamp(stamp->pid);
  EXPECT_FALSE(left && *left == *stamp) << "the watchdog still runs";
  waitForChild(agent, std::chrono::seconds(30));
  EXPECT_TRUE(processStamp(postmaster).has_value()) << "postgres was shut down";
  ::kill(postmaster, SIGKILL);
  ::waitpid(postmaster, nullptr, 0);
}

// The watchdog shared the agent's process group, so a
// stop of the group (kill -STOP -<pgid>, Ctrl-Z on a foreground agent) stopped it too, and
// it had the agent's name, so `killall dugong` killed it too.
TEST(Watchdog, AStopOfTheAgentsProcessGroupLeavesItRunningAndItActs) {
  dugong::testing::ScratchDir dir{"watchdog-group-stop"};
  const pid_t postmaster = fakePostmaster(dir.path());
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  const pid_t agent = ::fork();
  if (agent == 0) {
    ::setpgid(0, 0);  // a group of its own, as a daemon started from a shell is
    auto watchdog = Watchdog::start(dir.path(), std::chrono::milliseconds(200));
    if (!watchdog) ::_exit(1);
    (*watchdog)->setPrimary(true);
    const std::string text = std::to_string((*watchdog)->pid());
    if (::write(pipeFds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(pipeFds[1]);
  char buf[128] = {};
  const ssize_t n = ::read(pipeFds[0], buf, sizeof(buf) - 1);
  ::close(pipeFds[0]);
  ASSERT_GT(n, 0);
  const int watchdogPid = std::stoi(buf);
  std::string name;
  for (int i = 0; i < 500 && name != kWatchdogProcessName; ++i, ::usleep(10000)) {
    auto p = processStamp(watchdogPid);
    name = p ? p->name : "";
  }
  EXPECT_EQ(name, kWatchdogProcessName);
  ::kill(-agent, SIGSTOP);  // the agent's whole process group
  auto status = waitForChild(postmaster, std::chrono::seconds(60));
  ::kill(-agent, SIGKILL);
  ::kill(agent, SIGCONT);
  ::waitpid(agent, nullptr, 0);
  if (!status) {
    ::kill(postmaster, SIGKILL);
    ::waitpid(postmaster, nullptr, 0);
  }
  ASSERT_TRUE(status.has_value()) << "the watchdog was stopped with the agent's process group";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGINT);
}

// The primary's lease: the watchdog shuts postgres down at the lease's end the
// agent wrote, while the agent runs (a hung loop, or a follower cut off from its leader
// that keeps the connection up): here the agent is this test, running, and the limit for
// a stopped agent a minute.
TEST(Watchdog, ItShutsPostgresDownAtTheLeasesEndWhileTheAgentRuns) {
  dugong::testing::ScratchDir dir{"watchdog-lease"};
  const pid_t postmaster = fakePostmaster(dir.path());
  auto watchdog = Watchdog::start(dir.path(), std::chrono::milliseconds(60000));
  ASSERT_TRUE(watchdog) << watchdog.error();
  (*watchdog)->setPrimary(true);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  (*watchdog)->setLeaseDeadline(now + 300);
  auto status = waitForPostmaster(postmaster);
  ASSERT_TRUE(status.has_value()) << "postgres ran on past the lease's end";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGINT);
}

}  // namespace
}  // namespace dugong::agent
