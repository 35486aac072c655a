// The hook runner against real processes: what a hook receives, and what happens when
// it fails, hangs or cannot be started.
#include "agent/hooks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace dugong::agent {
namespace {

class HooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dugong-hooks-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }
  static HookOutcome runOne(HookRunner& r, HookCall call) {
    r.run(std::move(call));
    r.drain();
    return *r.status().last;
  }

  std::string dir_;
};

TEST_F(HooksTest, ArgumentsAndEnvironmentArePassedWithoutAShell) {
  HookRunner r(30);
  const auto o = runOne(r, {"onRoleChange", script("h", "printf '[%s]' \"$@\"; printf 'env=%s' \"$DUGONG_ROLE\"\n"),
                            {"primary", "sync", "$HOME; echo injected", "7"},
                            {"DUGONG_ROLE=primary"}});
  EXPECT_TRUE(o.ok) << o.describe();
  EXPECT_EQ(o.exitCode, 0);
  // Each argument arrives whole: no word splitting, no expansion, no command.
  EXPECT_EQ(o.output, "[primary][sync][$HOME; echo injected][7]env=primary");
  EXPECT_EQ(r.status().runs, 1u);
  EXPECT_EQ(r.status().failures, 0u);
}

TEST_F(HooksTest, AFailingHookIsReportedOnceAndNotRetried) {
  HookRunner r(30);
  const auto o = runOne(r, {"onRoleChange", script("h", "echo broken >&2; exit 3\n"), {}, {}});
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.exitCode, 3);
  EXPECT_EQ(o.output, "broken");
  EXPECT_EQ(o.describe(), "exited with status 3");
  const auto s = r.status();
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.toJson()["last"]["exitCode"], 3);
}

TEST_F(HooksTest, AHookPastItsTimeoutIsKilledWithItsChildren) {
  HookRunner r(1);
  const std::string marker = dir_ + "/child-ran";
  const auto o = runOne(r, {"onRoleChange", script("h", "(sleep 3; touch " + marker + ") &\nsleep 60\n"), {}, {}});
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.timedOut);
  EXPECT_EQ(r.status().failures, 1u);
  sleep(4);  // the background child would have touched the marker by now
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the hook's child outlived the kill";
}

TEST_F(HooksTest, AMissingExecutableIsAFailureWithItsReason) {
  HookRunner r(30);
  const auto o = runOne(r, {"onRoleChange", dir_ + "/absent", {}, {}});
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("No such file"), std::string::npos) << o.error;
  EXPECT_EQ(r.status().failures, 1u);
}

TEST_F(HooksTest, InheritedDescriptorsAreClosed) {
  const int fd = open("/dev/null", O_RDONLY);  // no O_CLOEXEC: it would leak into a plain exec
  ASSERT_GE(fd, 3);
  HookRunner r(30);
  const std::string f = std::to_string(fd);
  const auto o = runOne(r, {"onRoleChange", script("h", "if [ -e /proc/$$/fd/" + f + " ]; then echo open; else echo closed; fi\n"), {}, {}});
  close(fd);
  EXPECT_EQ(o.output, "closed");
}

TEST_F(HooksTest, HooksRunOneAtATimeInTheOrderAsked) {
  HookRunner r(30);
  const std::string log = dir_ + "/calls";
  const std::string h = script("h", "echo \"$1 start\" >> " + log + "; sleep 0.2; echo \"$1 end\" >> " + log + "\n");
  for (const char* role : {"a", "b", "c"}) r.run({"onRoleChange", h, {role}, {}});
  r.drain();
  std::ifstream in(log);
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_EQ(all.str(), "a start\na end\nb start\nb end\nc start\nc end\n");
  EXPECT_EQ(r.status().runs, 3u);
}

}  // namespace
}  // namespace dugong::agent
