#include "agent/watchdog.h"
#include "agent/suspend_clock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "agent/logging.h"
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
  EXPECT_EQ(WTERMSIG(*status), SIGQUIT);  // an immediate shutdown (decision 0058)
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
  EXPECT_EQ(WTERMSIG(*status), SIGQUIT);
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
  (*watchdog)->setLeaseDeadline(bootTimeMs() + 300);  // the driver's clock
  auto status = waitForPostmaster(postmaster);
  ASSERT_TRUE(status.has_value()) << "postgres ran on past the lease's end";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGQUIT);
}

// ---- a hung loop ------------------------------------------------------------------

// How a fake agent's loop behaves in the tests below.
struct FakeLoop {
  bool primary = false;
  // A lease's end this close ahead when the loop hangs (0: none).
  int64_t leaseInMs = 0;
  // The agent's stderr is a pipe nobody reads, full before the watchdog starts (it
  // shares the agent's stderr): a log line blocks there.
  bool stderrStuck = false;
  // The loop ends its beats on purpose (a stopped agent on its way out), then waits.
  bool endsBeats = false;
};

// A pipe whose write end is full (its buffer as small as the kernel allows); the read
// end is never read. Returns {read end, write end}.
std::pair<int, int> fullPipe() {
  int fds[2] = {-1, -1};
  if (::pipe(fds) != 0) return {-1, -1};
  ::fcntl(fds[1], F_SETPIPE_SZ, 4096);
  // A description of its own for the filling, so that the agent's stays blocking.
  const int filler = ::open(("/proc/self/fd/" + std::to_string(fds[1])).c_str(), O_WRONLY | O_NONBLOCK);
  const std::string block(4096, 'x');
  while (filler >= 0 && ::write(filler, block.data(), block.size()) > 0) {
  }
  if (filler >= 0) ::close(filler);
  return {fds[0], fds[1]};
}

// A fake agent: it starts its watchdog (`limit`), then beats every 10 ms from its "loop"
// until a byte (or the end) arrives on `control`; then its loop hangs while the process
// runs on (it sleeps: state S), or, with `endsBeats`, it ends its beats first.
pid_t agentWithALoop(const std::string& dataDir, const std::string& sessionFile, std::chrono::milliseconds limit,
                     const FakeLoop& loop, int control) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (loop.stderrStuck) {
    auto [readEnd, writeEnd] = fullPipe();
    if (writeEnd < 0) ::_exit(1);
    ::dup2(writeEnd, 2);
    (void)readEnd;  // kept open, never read
    // The agent's own logger, on that stderr (the watchdog inherits it).
    if (!setupLogging("info", "text", "fake")) ::_exit(1);
  }
  auto watchdog = Watchdog::start(dataDir, limit, sessionFile);
  if (!watchdog) ::_exit(1);
  (*watchdog)->setPrimary(loop.primary);
  ::fcntl(control, F_SETFL, O_NONBLOCK);
  for (;;) {
    (*watchdog)->beat();
    char c = 0;
    const ssize_t n = ::read(control, &c, 1);
    if (n >= 0) break;  // a byte, or the end
    ::usleep(10000);
  }
  if (loop.leaseInMs > 0) (*watchdog)->setLeaseDeadline(bootTimeMs() + loop.leaseInMs);
  if (loop.endsBeats) (*watchdog)->endBeats();
  for (;;) ::pause();
}

// What a test of a hung loop looks at: the fake agent, its postgres and its session file.
struct HungLoopRun {
  dugong::testing::ScratchDir dir{"watchdog-hung-loop"};
  std::string sessionFile = dir.path() + "/session";
  pid_t postmaster = -1;
  pid_t agent = -1;
  int control = -1;

  HungLoopRun(const FakeLoop& loop, bool standby, std::chrono::milliseconds limit) {
    if (standby) std::ofstream(dir.path() + "/standby.signal") << "";
    std::ofstream(sessionFile) << "{}\n";
    postmaster = fakePostmaster(dir.path());
    int fds[2];
    if (::pipe(fds) != 0) return;
    agent = agentWithALoop(dir.path(), sessionFile, limit, loop, fds[0]);
    ::close(fds[0]);
    control = fds[1];
  }
  ~HungLoopRun() {
    if (control >= 0) ::close(control);
    if (agent > 0) {
      ::kill(agent, SIGKILL);
      ::waitpid(agent, nullptr, 0);
    }
    if (postmaster > 0) {
      ::kill(postmaster, SIGKILL);
      ::waitpid(postmaster, nullptr, 0);
    }
  }
  bool running(pid_t& pid) {
    if (pid <= 0) return false;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) != pid) return true;
    ended[pid] = status;
    pid = -1;
    return false;
  }
  // While the loop beats, for `span`: the agent, its postgres and its session stay.
  void expectNothingWhileItBeats(std::chrono::milliseconds span) {
    const auto end = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < end) {
      ASSERT_TRUE(running(agent)) << "the watchdog ended an agent whose loop beats";
      ASSERT_TRUE(running(postmaster)) << "the watchdog shut down the postgres of an agent whose loop beats";
      ASSERT_TRUE(std::filesystem::exists(sessionFile)) << "the session file went while the loop beats";
      ::usleep(50000);
    }
  }
  // The loop stops beating; the agent's wait status once it ends (bounded for a broken
  // build only).
  std::optional<int> hangAndWaitForTheAgent() {
    if (::write(control, "h", 1) != 1) return std::nullopt;
    const pid_t pid = agent;
    auto status = waitForChild(pid, std::chrono::seconds(20));
    if (status) agent = -1;
    return status;
  }
  std::map<pid_t, int> ended;
};

constexpr auto kLimit = std::chrono::milliseconds(1000);

// A primary's agent whose loop hangs while the process runs keeps its ZooKeeper session
// (the client's own threads answer the pings) and does nothing. The watchdog shuts its
// postgres down (as for a stopped agent), kills it and removes the kept session, so
// that the session expires and the sync can take over.
TEST(Watchdog, AHungLoopOfAPrimaryHasItsPostgresShutDownAndTheAgentKilled) {
  HungLoopRun run(FakeLoop{.primary = true}, /*standby=*/false, kLimit);
  ASSERT_GT(run.agent, 0);
  run.expectNothingWhileItBeats(kLimit * 3);
  auto status = run.hangAndWaitForTheAgent();
  ASSERT_TRUE(status.has_value()) << "the agent whose loop hung runs on";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  const pid_t postmaster = run.postmaster;
  auto pg = waitForChild(postmaster, std::chrono::seconds(20));
  ASSERT_TRUE(pg.has_value()) << "postgres runs on";
  run.postmaster = -1;
  ASSERT_TRUE(WIFSIGNALED(*pg));
  EXPECT_EQ(WTERMSIG(*pg), SIGQUIT);
  EXPECT_FALSE(std::filesystem::exists(run.sessionFile)) << "the next run would re-attach the hung one's session";
}

// A standby's postgres acknowledges no commit: it is left running. The agent is killed all
// the same, so that its session expires and the primary stops counting on it (a sync
// whose postgres died stalls every commit while its agent holds the session).
TEST(Watchdog, AHungLoopOfAStandbyKillsTheAgentAndLeavesPostgresRunning) {
  HungLoopRun run(FakeLoop{}, /*standby=*/true, kLimit);
  ASSERT_GT(run.agent, 0);
  run.expectNothingWhileItBeats(kLimit * 3);
  auto status = run.hangAndWaitForTheAgent();
  ASSERT_TRUE(status.has_value()) << "the agent whose loop hung runs on";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  // The watchdog signals postgres before it kills the agent: nothing more is coming.
  EXPECT_TRUE(run.running(run.postmaster)) << "the standby's postgres was shut down";
  EXPECT_FALSE(std::filesystem::exists(run.sessionFile));
}

// A peer that is not the primary but whose postgres is not a standby (a deposed primary
// not yet demoted, a promotion under way) may acknowledge commits: shut down too.
TEST(Watchdog, AHungLoopOfAPeerWhosePostgresIsNotAStandbyHasItShutDown) {
  HungLoopRun run(FakeLoop{}, /*standby=*/false, kLimit);
  ASSERT_GT(run.agent, 0);
  run.expectNothingWhileItBeats(kLimit * 3);
  auto status = run.hangAndWaitForTheAgent();
  ASSERT_TRUE(status.has_value()) << "the agent whose loop hung runs on";
  const pid_t postmaster = run.postmaster;
  auto pg = waitForChild(postmaster, std::chrono::seconds(20));
  ASSERT_TRUE(pg.has_value()) << "postgres runs on";
  run.postmaster = -1;
  ASSERT_TRUE(WIFSIGNALED(*pg));
  EXPECT_EQ(WTERMSIG(*pg), SIGQUIT);
}

// The watchdog writes its log lines to the agent's stderr. When that is a pipe nobody
// reads (what hung the agent), a line must not hang the watchdog too: here its line at
// the lease's end comes before the loop counts as hung, and it still ends the agent.
TEST(Watchdog, AStderrNobodyReadsDoesNotStopItFromEndingAHungLoop) {
  HungLoopRun run(FakeLoop{.primary = true, .leaseInMs = 50, .stderrStuck = true}, /*standby=*/false, kLimit);
  ASSERT_GT(run.agent, 0);
  run.expectNothingWhileItBeats(kLimit * 2);
  auto status = run.hangAndWaitForTheAgent();
  ASSERT_TRUE(status.has_value()) << "the watchdog hung on its log line; the agent runs on";
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
}

// An agent on its way out (its stop done, its session closing or kept) ends its beats: its
// silence then is no hang.
TEST(Watchdog, ALoopThatEndedItsBeatsIsNotAHungOne) {
  HungLoopRun run(FakeLoop{.endsBeats = true}, /*standby=*/false, kLimit);
  ASSERT_GT(run.agent, 0);
  ASSERT_EQ(::write(run.control, "e", 1), 1);
  // Long past the bound, and past the watchdog's wake-ups.
  const auto end = std::chrono::steady_clock::now() + kLimit * 3;
  while (std::chrono::steady_clock::now() < end) {
    ASSERT_TRUE(run.running(run.agent)) << "the watchdog ended an agent that had ended its beats";
    ASSERT_TRUE(run.running(run.postmaster));
    ::usleep(50000);
  }
  EXPECT_TRUE(std::filesystem::exists(run.sessionFile));
}

}  // namespace
}  // namespace dugong::agent
