// The HTTP API's mutating endpoints on a real 3-peer cluster, driven by curl as an
// operator's automation would: POST /reload on the primary makes a changed setting take
// effect, POST /restart on the sync restarts its postgres, which streams again, and
// POST /switchover to the async (Patroni's body: leader and candidate) moves the primary
// there (the two-step promote); a leader that is not the primary is refused (412); without
// the credential, with a bad body, for an unknown candidate or on a frozen cluster each
// is refused and nothing changes. And a real agent
// serving HTTPS with a certificate the test made with openssl.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "ops/http_client.h"
#include "dugong/version.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

struct Curl {
  int status = 0;
  nlohmann::json body;
};

// curl -X POST http://127.0.0.1:<port><path> with `args` (already quoted).
Curl post(int port, const std::string& path, const std::string& args) {
  const std::string cmd = "curl -s --max-time 120 -w '\\n%{http_code}' -X POST " + args + " http://127.0.0.1:" +
                          std::to_string(port) + path;
  const std::string out = dugong::testing::commandOutput(cmd);
  Curl c;
  const auto nl = out.rfind('\n');
  if (nl == std::string::npos) return c;
  c.status = std::atoi(out.c_str() + nl + 1);
  c.body = nlohmann::json::parse(out.substr(0, nl), nullptr, false);
  return c;
}

using dugong::testing::commandOutput;

std::string candidate(const std::string& id) { return "-d '{\"candidate\": \"" + id + "\"}'"; }

TEST(HttpApiE2E, SwitchoverToTheAsyncWithTheCredentialAndRefusalsThatChangeNothing) {
  dugong::testing::ScratchDir dir("dugong-http-e2e");
  const std::string tokenFile = dir.path() + "/token";
  std::ofstream(tokenFile) << "s3cret-t0ken\n";
  ::chmod(tokenFile.c_str(), 0600);
  HarnessOptions o;
  o.httpConfig = "  auth:\n    tokenFile: " + tokenFile + "\n";
  Harness h(o);
  h.startAll();
  const int primary = h.waitForHealthyCluster(2, 180s);
  ASSERT_GE(primary, 0) << h.describe();
  const int async = h.indexWithRole("async");
  ASSERT_GE(async, 0);
  const std::string A = h.peer(async).id;
  const int port = h.peer(primary).httpPort;
  const std::string auth = "-H 'Authorization: Bearer s3cret-t0ken'";
  const std::string before = h.zkState()->serialize();

  // The version, from both binaries and the agent.
  const std::string version = commandOutput(std::string(DUGONG_AGENT_BINARY) + " --version");
  EXPECT_EQ(version, std::string("dugong ") + kVersion + "\n");
  EXPECT_EQ(commandOutput(std::string(DUGONG_ADM_BINARY) + " version"), std::string("dugong-adm ") + kVersion + "\n");
  EXPECT_EQ((*h.status(primary))["agent"]["version"], kVersion);
  EXPECT_NE(commandOutput("curl -s http://127.0.0.1:" + std::to_string(port) + "/metrics")
                .find(std::string("dugong_build_info{version=\"") + kVersion + "\"} 1"),
            std::string::npos);

  // Refusals: a clear reason, and the state untouched.
  Curl noCredential = post(port, "/switchover", candidate(A));
  EXPECT_EQ(noCredential.status, 401) << noCredential.body;
  Curl wrong = post(port, "/switchover", "-u admin:wrong " + candidate(A));
  EXPECT_EQ(wrong.status, 401) << wrong.body;
  Curl badBody = post(port, "/switchover", auth + " -d 'candidate=" + A + "'");
  EXPECT_EQ(badBody.status, 400) << badBody.body;
  EXPECT_TRUE(badBody.body.contains("error")) << badBody.body;
  Curl unknown = post(port, "/switchover", auth + " " + candidate("nobody"));
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  // Patroni's "leader": the primary's id, checked; another peer's is refused with 412.
  const std::string S0 = h.peer(h.indexWithRole("sync")).id;
  Curl notLeader = post(port, "/switchover", auth + " -d '{\"leader\": \"" + S0 + "\", \"candidate\": \"" + A + "\"}'");
  EXPECT_EQ(notLeader.status, 412) << notLeader.body;
  EXPECT_EQ(notLeader.body.value("error", ""), "the leader given, " + S0 + ", is not the primary: the primary is " +
                                                   h.peer(primary).id + " (generation 1); nothing was changed")
      << notLeader.body;
  EXPECT_EQ(h.zkState()->serialize(), before);
  ASSERT_TRUE(h.updateState([](ClusterState& s) { s.freeze = {{"date", "now"}, {"reason", "http e2e"}}; }));
  const std::string frozen = h.zkState()->serialize();
  Curl whileFrozen = post(port, "/switchover", auth + " " + candidate(A));
  EXPECT_EQ(whileFrozen.status, 409) << whileFrozen.body;
  EXPECT_NE(whileFrozen.body.value("error", "").find("frozen"), std::string::npos) << whileFrozen.body;
  EXPECT_EQ(h.zkState()->serialize(), frozen);
  ASSERT_TRUE(h.updateState([](ClusterState& s) { s.freeze = nullptr; }));

  // POST /reload and /restart, on this peer's postgres. Refused without the credential
  // (nothing restarted) or with a body naming a condition.
  const int sync = h.indexWithRole("sync");
  ASSERT_GE(sync, 0);
  const int syncPort = h.peer(sync).httpPort;
  auto value = [&](int i, const std::string& query) { return h.peer(i).pg->value(query); };
  auto postmasterPid = [&](int i) { return value(i, "SELECT split_part(pg_read_file('postmaster.pid'), E'\\n', 1)"); };
  const std::string syncPid = postmasterPid(sync);
  ASSERT_FALSE(syncPid.empty()) << h.describe();
  Curl restartNoCredential = post(syncPort, "/restart", "");
  EXPECT_EQ(restartNoCredential.status, 401) << restartNoCredential.body;
  EXPECT_TRUE(restartNoCredential.body.contains("error")) << restartNoCredential.body;
  Curl restartWrong = post(syncPort, "/restart", "-u admin:wrong");
  EXPECT_EQ(restartWrong.status, 401) << restartWrong.body;
  Curl reloadNoCredential = post(port, "/reload", "");
  EXPECT_EQ(reloadNoCredential.status, 401) << reloadNoCredential.body;
  Curl restartCondition = post(syncPort, "/restart", auth + " -d '{\"role\": \"replica\"}'");
  EXPECT_EQ(restartCondition.status, 400) << restartCondition.body;
  EXPECT_EQ(postmasterPid(sync), syncPid);

  // A reload makes a setting changed in postgresql.auto.conf (not a managed one) take
  // effect on the primary.
  const std::string loadedAt = value(primary, "SELECT pg_conf_load_time()");
  ASSERT_TRUE(h.sql(primary, "ALTER SYSTEM SET work_mem = '7MB'").ok());
  EXPECT_NE(value(primary, "SHOW work_mem"), "7MB");
  Curl reload = post(port, "/reload", auth);
  ASSERT_EQ(reload.status, 200) << reload.body << "\n" << h.logTail(primary);
  EXPECT_EQ(reload.body["action"], "reload") << reload.body;
  EXPECT_EQ(reload.body["peer"], h.peer(primary).id) << reload.body;
  EXPECT_EQ(reload.body["role"], "primary") << reload.body;
  // pg_reload_conf() signals the postmaster; new sessions see the file once it has read it.
  EXPECT_TRUE(h.waitFor([&] { return value(primary, "SHOW work_mem") == "7MB"; }, 30s));
  EXPECT_NE(value(primary, "SELECT pg_conf_load_time()"), loadedAt);
  ASSERT_TRUE(h.sql(primary, "ALTER SYSTEM RESET work_mem").ok());
  Curl reloadBasic = post(port, "/reload", "-u admin:s3cret-t0ken -d '{}'");
  EXPECT_EQ(reloadBasic.status, 200) << reloadBasic.body;
  EXPECT_TRUE(h.waitFor([&] { return value(primary, "SHOW work_mem") != "7MB"; }, 30s));

  // A restart of the sync: a new postmaster, streaming again, reported in its /state as
  // an operator request; no failover.
  Curl restarted = post(syncPort, "/restart", auth);
  ASSERT_EQ(restarted.status, 200) << restarted.body << "\n" << h.logTail(sync);
  EXPECT_EQ(restarted.body["action"], "restart") << restarted.body;
  EXPECT_EQ(restarted.body["role"], "sync") << restarted.body;
  EXPECT_EQ(restarted.body["state"], "done") << restarted.body;
  std::string newPid;
  EXPECT_TRUE(h.waitFor([&] { return !(newPid = postmasterPid(sync)).empty(); }, 30s));
  EXPECT_NE(newPid, syncPid);
  // Streaming again: in its own status, and in its upstream's replication rows; and the
  // async, which streams from the sync (the chain), has reconnected to it.
  auto streamsTo = [&](int upstream, int downstream) {
    auto st = h.status(upstream);
    if (!st || !(*st)["postgres"]["replication"].is_array()) return false;
    for (const auto& row : (*st)["postgres"]["replication"]) {
      if (row.value("applicationName", "") == h.peer(downstream).id && row.value("state", "") == "streaming") {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(h.waitFor(
      [&] {
        auto st = h.status(sync);
        return st && (*st)["health"]["streamingReplica"] == true && streamsTo(primary, sync) && streamsTo(sync, async);
      },
      60s))
      << h.describe();
  auto syncState = h.status(sync);
  ASSERT_TRUE(syncState.has_value());
  EXPECT_EQ((*syncState)["request"]["id"], restarted.body["request"]) << *syncState;
  EXPECT_EQ((*syncState)["request"]["state"], "done") << *syncState;
  EXPECT_NE(h.logTail(sync, 400).find("from POST /restart over HTTP: restart postgres"), std::string::npos);
  auto now = h.zkState();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->generation, 1);
  EXPECT_EQ(now->primary.id, h.peer(primary).id);
  EXPECT_FALSE(now->hasPromote()) << before;

  // The async becomes the sync, then takes over; basic authentication with the token
  // as the password, asked of the old primary's agent, with Patroni's body.
  const std::string P = h.peer(primary).id;
  Curl done = post(port, "/switchover",
                   "-u admin:s3cret-t0ken -d '{\"leader\": \"" + P + "\", \"candidate\": \"" + A + "\"}'");
  ASSERT_EQ(done.status, 200) << done.body << "\n" << h.describe();
  EXPECT_EQ(done.body["primary"], A);
  EXPECT_EQ(done.body["steps"].size(), 2u) << done.body;
  auto after = h.zkState();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->primary.id, A);
  EXPECT_EQ(after->generation, 3);
  EXPECT_EQ(h.writablePrimary(), async);
  auto history = h.history();
  std::string reasons;
  for (const auto& e : history) reasons += e.data + "\n";
  EXPECT_NE(reasons.find("switchover to " + A + " (request 1 of 2), POST /switchover, by the agent of " + P),
            std::string::npos)
      << reasons;
}

// No cluster is needed: the agent serves its API before it reaches ZooKeeper (here
// nobody answers) or postgres (never set up).
TEST(HttpApiE2E, TheAgentServesHttpsWithATestMadeCertificate) {
  dugong::testing::ScratchDir dir("dugong-https-agent");
  const auto [cert, key] = dugong::testing::makeSelfSignedCertificate(dir.path(), "IP:127.0.0.1");
  const int port = dugong::testing::freeLoopbackPort();
  const std::string config = dir.path() + "/dugong.yaml";
  std::ofstream(config) << "cluster: tls\nzookeeper:\n  connect: 127.0.0.1:1\npeer:\n  ip: 127.0.0.1\n"
                        << "postgres:\n  dataDir: " << dir.path() << "/data\n  port: "
                        << dugong::testing::freeLoopbackPort() << "\n  replicationPassword: x\n"
                        << "http:\n  listen: 127.0.0.1:" << port << "\n  certFile: " << cert << "\n  keyFile: " << key
                        << "\n";
  const std::string log = dir.path() + "/agent.log";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(DUGONG_AGENT_BINARY, DUGONG_AGENT_BINARY, "--config", config.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string base = "https://127.0.0.1:" + std::to_string(port);
  agent::setHttpsCaFile(cert);
  std::optional<agent::HttpResponse> live;
  for (int i = 0; i < 300 && !live; ++i) {
    if (auto r = agent::httpGet(base + "/liveness"); r) live = *r;
    if (!live) std::this_thread::sleep_for(100ms);
  }
  auto state = agent::httpGet(base + "/state");
  auto health = agent::httpGet(base + "/health");
  agent::setHttpsCaFile("");
  auto untrusted = agent::httpGet(base + "/liveness");
  const std::string plain = commandOutput("curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:" +
                                          std::to_string(port) + "/liveness");
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(live.has_value()) << commandOutput("tail -20 " + log);
  EXPECT_EQ(live->status, 200);
  ASSERT_TRUE(state.ok()) << state.error();
  auto j = nlohmann::json::parse(state->body);
  EXPECT_EQ(j["agent"]["version"], kVersion);
  ASSERT_TRUE(health.ok()) << health.error();
  EXPECT_EQ(health->status, 503);  // no postgres
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.error().find("certificate verify failed"), std::string::npos) << untrusted.error();
  EXPECT_EQ(plain, "000");  // plain HTTP gets no answer
}

}  // namespace
}  // namespace dugong::e2e
