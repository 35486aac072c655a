// The agent's logs as operators consume them: --log-format json (every line one JSON
// object with the fields log shippers index) and SIGHUP re-reading log.level. A real
// agent in one-node-write mode over real ZooKeeper and postgres.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/cluster_harness.h"

namespace dugong::ecosystem {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// A text line: "<time> <level> <message>".
bool isInfoLine(const std::string& line) { return std::regex_search(line, std::regex(R"(^\S+ info )")); }

bool contains(const std::vector<std::string>& all, const std::string& text) {
  for (const auto& l : all) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

class AgentLogs : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }

  // One peer in one-node-write mode with this log.level (and log.format, if given),
  // started and writable.
  void startSingleton(const std::string& level, const std::string& format = "") {
    e2e::HarnessOptions o;
    o.peers = 0;
    o.cluster = "logs";
    h_ = std::make_unique<e2e::Harness>(o);
    h_->addPeer(/*singleton=*/true);
    setLogSection(level, format);
    h_->startAgent(0);
    ASSERT_TRUE(h_->waitFor([&] { return h_->httpStatus(0, "/primary") == 200; }, 90s));
  }

  // Rewrites the config's log section (the harness writes it last).
  void setLogSection(const std::string& level, const std::string& format = "") {
    const std::string path = h_->peer(0).configPath;
    std::ifstream in(path);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string text = buf.str();
    text = text.substr(0, text.rfind("log:\n"));
    text += "log:\n  level: " + level + "\n";
    if (!format.empty()) text += "  format: " + format + "\n";
    std::ofstream(path) << text;
  }

  void hangUp() { ASSERT_EQ(::kill(h_->peer(0).agentPid, SIGHUP), 0); }
  std::vector<std::string> log() { return lines(h_->peer(0).logPath); }
  bool waitForLine(const std::string& text) {
    return h_->waitFor([&] { return contains(log(), text); }, 10s);
  }

  std::unique_ptr<e2e::Harness> h_;
};

TEST_F(AgentLogs, JsonFormatWritesOneObjectPerLineWithThePeerAndGeneration) {
  startSingleton("debug", "json");
  hangUp();
  ASSERT_TRUE(waitForLine("SIGHUP: log level"));
  h_->stopAgent(0);

  const std::regex iso8601(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  const auto all = log();
  ASSERT_GT(all.size(), 3u);
  int withGeneration = 0;
  for (const auto& line : all) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(j.contains("time") && j["time"].is_string()) << line;
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), iso8601)) << line;
    ASSERT_TRUE(j.contains("level") && j["level"].is_string()) << line;
    EXPECT_TRUE(std::set<std::string>({"trace", "debug", "info", "warning", "error", "critical"})
                    .count(j["level"].get<std::string>()))
        << line;
    EXPECT_EQ(j.value("logger", ""), "dugong") << line;
    ASSERT_TRUE(j.contains("message") && j["message"].is_string()) << line;
    EXPECT_FALSE(j["message"].get<std::string>().empty()) << line;
    EXPECT_EQ(j.value("peer", ""), h_->peer(0).id) << line;
    ASSERT_TRUE(j.contains("generation")) << line;
    EXPECT_TRUE(j["generation"].is_null() || (j["generation"].is_number_integer() && j["generation"] >= 1)) << line;
    if (j["generation"].is_number_integer()) ++withGeneration;
  }
  EXPECT_TRUE(contains(all, "starting"));
  RecordProperty("linesWithAGeneration", withGeneration);
}

TEST_F(AgentLogs, JsonLinesAfterSetupCarryTheClusterGeneration) {
  startSingleton("info", "json");
  h_->stopAgent(0);
  const auto all = log();
  ASSERT_FALSE(all.empty());
  const auto last = nlohmann::json::parse(all.back(), nullptr, false);
  ASSERT_TRUE(last.is_object());
  EXPECT_EQ(last["generation"], h_->zkState()->generation) << all.back();
}

TEST_F(AgentLogs, SighupRereadsTheLogLevel) {
  startSingleton("warn");
  for (const auto& line : log()) EXPECT_FALSE(isInfoLine(line)) << "an info line at level warn: " << line;

  setLogSection("info");
  hangUp();
  ASSERT_TRUE(waitForLine("SIGHUP: log level info (was warn)"));

  // A bad level is refused with a clear error, and the level in force stays.
  setLogSection("loud");
  hangUp();
  ASSERT_TRUE(waitForLine("not reloading the log level"));
  EXPECT_TRUE(contains(log(), "log.level: expected trace, debug, info, warn or error, found \"loud\""));

  setLogSection("warn");
  hangUp();
  ASSERT_TRUE(waitForLine("SIGHUP: log level warn (was info)"));
  const size_t before = log().size();
  h_->stopAgent(0);  // "received SIGTERM" and "stopping" are info lines
  const auto after = log();
  for (size_t k = before; k < after.size(); ++k) EXPECT_FALSE(isInfoLine(after[k])) << after[k];
}

}  // namespace
}  // namespace dugong::ecosystem
