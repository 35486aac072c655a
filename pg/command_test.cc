#include "pg/command.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {
using namespace std::chrono_literals;

TEST(RunCommand, RunsAsTheGivenUserWithoutAShell) {
  CommandSpec spec;
  spec.argv = {"/usr/bin/id", "-un"};
  spec.runAsUser = "postgres";
  auto r = runCommand(spec);
  ASSERT_TRUE(r.ok()) << r.describe() << r.output;
  EXPECT_EQ(r.output, "postgres\n");

  // Arguments are passed as they are, never through a shell.
  spec.argv = {"/bin/echo", "$(id)", "a;b"};
  r = runCommand(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.output, "$(id) a;b\n");
}

TEST(RunCommand, ReportsExitCodesAndOutput) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = runCommand(spec);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
  EXPECT_EQ(r.describe(), "exit 3");
}

TEST(RunCommand, KillsTheProcessGroupAtTheDeadline) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30"};
  spec.timeout = 300ms;
  auto r = runCommand(spec);
  EXPECT_TRUE(r.timedOut);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(r.elapsed, 20s);  // a bound, not a timing assertion: without the kill it takes 30 s
}

TEST(RunCommand, MissingUserOrProgramIsAnError) {
  CommandSpec spec;
  spec.argv = {"/bin/true"};
  spec.runAsUser = "no-such-user-dugong";
  auto r = runCommand(spec);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.error.find("does not exist"), std::string::npos);

  spec.runAsUser = "";
  spec.argv = {"/nonexistent/program"};
  r = runCommand(spec);
  EXPECT_EQ(r.exitCode, 127);
}

TEST(DescribeArgv, QuotesWhatNeedsIt) {
  EXPECT_EQ(describeArgv({"/bin/x", "-D", "a b", "it's"}), "/bin/x -D 'a b' 'it'\\''s'");
}

}  // namespace
}  // namespace dugong::pg
