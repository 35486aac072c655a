#include "pg/command.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "pg/controller_support.h"

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

// The output of a program that succeeded (pg_controldata runs at every start and
// rejoin) is for debugging: one line at info says what ran and how long it took
// (operator review P3: 69 % of an agent's log lines were pg_controldata's). A failure's
// output stays at warn, where the operator needs it.
TEST(LogOutput, ASuccessfulProgramsOutputIsAtDebugAndAFailuresAtWarn) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%l %v");
  auto logger = std::make_shared<spdlog::logger>("test", sink);
  auto before = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  CommandResult ok;
  ok.started = true;
  ok.exitCode = 0;
  ok.output = "pg_control version number:            1300\nDatabase cluster state:               shut down\n";
  logger->set_level(spdlog::level::info);
  logOutput("pg_controldata", ok);
  const std::string atInfo = out.str();
  logger->set_level(spdlog::level::debug);
  logOutput("pg_controldata", ok);
  const std::string atDebug = out.str().substr(atInfo.size());
  CommandResult failed = ok;
  failed.exitCode = 1;
  out.str("");
  logger->set_level(spdlog::level::info);
  logOutput("pg_rewind", failed);
  const std::string failure = out.str();
  spdlog::set_default_logger(before);

  EXPECT_EQ(atInfo, "info pg: pg_controldata finished in 0 ms\n");
  EXPECT_NE(atDebug.find("debug pg: pg_controldata printed:\npg_control version number"), std::string::npos) << atDebug;
  EXPECT_NE(failure.find("warning pg: pg_rewind failed (exit 1) after 0 ms:\npg_control version number"),
            std::string::npos)
      << failure;
}

}  // namespace
}  // namespace dugong::pg
