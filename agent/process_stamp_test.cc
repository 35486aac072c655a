#include "agent/process_stamp.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

// A child that sleeps until it is signalled.
pid_t sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The stamp of a child once it runs its program (its name is then "sleep").
ProcessStamp stampOnceExeced(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    auto p = processStamp(pid);
    if (p && p->name == "sleep") return *p;
    ::usleep(10000);
  }
  ADD_FAILURE() << "child " << pid << " never ran sleep";
  return {};
}

TEST(ProcessStamp, NamesThisProcessByPidStartTimeAndName) {
  auto self = processStamp(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->pid, ::getpid());
  EXPECT_GT(self->startTime, 0u);
  EXPECT_EQ(self->name, "agent_test");
  auto parsed = parseProcessStamp(self->text());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, *self);
}

TEST(ProcessStamp, ABadRecordIsNotAStamp) {
  EXPECT_FALSE(parseProcessStamp("").has_value());
  EXPECT_FALSE(parseProcessStamp("12").has_value());
  EXPECT_FALSE(parseProcessStamp("-3 100").has_value());
  EXPECT_FALSE(parseProcessStamp("12 100 7").has_value());
  EXPECT_FALSE(parseProcessStamp("pid 100").has_value());
}

TEST(ProcessStamp, AZombieOrAnEndedProcessHasNone) {
  const pid_t pid = sleeper();
  stampOnceExeced(pid);
  ::kill(pid, SIGKILL);
  // Not reaped yet: a zombie, which is not a running process.
  for (int i = 0; i < 1000 && processStamp(pid).has_value(); ++i) ::usleep(10000);
  EXPECT_FALSE(processStamp(pid).has_value());
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(processStamp(pid).has_value());
}

TEST(ProcessStamp, EndProcessSignalsTheProcessItNames) {
  const pid_t pid = sleeper();
  const ProcessStamp p = stampOnceExeced(pid);
  EXPECT_TRUE(endProcess(p, SIGTERM, std::chrono::seconds(30)));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// A pid now held by another process (another start time) is never signalled.
TEST(ProcessStamp, EndProcessLeavesAReusedPidAlone) {
  const pid_t pid = sleeper();
  ProcessStamp other = stampOnceExeced(pid);
  other.startTime += 1;
  EXPECT_TRUE(endProcess(other, SIGKILL, std::chrono::seconds(1)));
  EXPECT_TRUE(processStamp(pid).has_value()) << "a process with another start time was signalled";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(ProcessRecord, IsWrittenAndReadBackAndABadOneIsAnError) {
  dugong::testing::ScratchDir dir{"process-record"};
  const std::string path = dir.path() + "/data.dugong-session.watchdog";
  auto none = readProcessRecord(path);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_FALSE(none->has_value());
  const ProcessStamp self = *processStamp(::getpid());
  ASSERT_TRUE(writeProcessRecord(path, self).ok());
  auto read = readProcessRecord(path);
  ASSERT_TRUE(read.ok()) << read.error();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, self);
  std::ofstream(path) << "not a record";
  auto bad = readProcessRecord(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("not a record"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace dugong::agent
