// The HTTP API's routing as a table: request and status in, status code and reason out.
#include "agent/http_api.h"

#include <gtest/gtest.h>

namespace dugong::agent {
namespace {

ApiStatus primary() {
  ApiStatus s;
  s.role = Role::kPrimary;
  s.postgresOnline = true;
  s.writablePrimary = true;
  s.state = [] { return nlohmann::json{{"peer", "a"}}; };
  s.metrics = [] { return std::string("dugong_up 1\n"); };
  return s;
}

ApiStatus standby(Role role, uint64_t backlog) {
  ApiStatus s = primary();
  s.role = role;
  s.writablePrimary = false;
  s.streamingReplica = true;
  s.replayBacklogBytes = backlog;
  return s;
}

ApiStatus down(Role role) {
  ApiStatus s = primary();
  s.role = role;
  s.postgresOnline = false;
  s.writablePrimary = false;
  return s;
}

ApiStatus tagged(ApiStatus s) {
  s.noloadbalance = true;
  return s;
}

HttpRequest get(const std::string& target) {
  HttpRequest r;
  r.method = "GET";
  const auto q = target.find('?');
  r.path = target.substr(0, q);
  r.query = q == std::string::npos ? "" : target.substr(q + 1);
  return r;
}

struct Case {
  const char* target;
  ApiStatus status;
  int code;
};

TEST(HttpApi, ReadEndpointsAnswerByRoleLagAndTags) {
  const ApiStatus sync = standby(Role::kSync, 100);
  const ApiStatus async = standby(Role::kAsync, 32u << 20);  // 32 MB behind
  const ApiStatus deposed = down(Role::kDeposed);
  const std::vector<Case> cases = {
      {"/ping", deposed, 200},
      {"/liveness", deposed, 200},
      {"/health", primary(), 200},
      {"/health", sync, 200},
      {"/health", deposed, 503},
      {"/readiness", primary(), 200},
      {"/readiness", sync, 200},
      {"/readiness", deposed, 503},
      {"/primary", primary(), 200},
      {"/primary", sync, 503},
      {"/replica", primary(), 503},
      {"/replica", sync, 200},
      {"/replica", async, 200},
      {"/replica?lag=16MB", async, 503},
      {"/replica?lag=1GB", async, 200},
      {"/replica?lag=100", sync, 200},
      {"/replica?lag=99", sync, 503},
      {"/replica", tagged(sync), 503},
      {"/replica", deposed, 503},
      {"/read-only", primary(), 200},
      {"/read-only", tagged(primary()), 200},
      {"/read-only?lag=1", primary(), 200},
      {"/read-only", sync, 200},
      {"/read-only?lag=16MB", async, 503},
      {"/read-only", tagged(async), 503},
      {"/read-only", deposed, 503},
      {"/sync", sync, 200},
      {"/sync", async, 503},
      {"/sync", primary(), 503},
      {"/sync?lag=10", sync, 503},
      {"/async", async, 200},
      {"/async", sync, 503},
      {"/async?lag=1GB&other=x", async, 200},
      {"/async", tagged(async), 503},
      {"/state", deposed, 200},
      {"/metrics", deposed, 200},
      {"/nope", primary(), 404},
      {"/replica?lag=abc", sync, 400},
      {"/replica?lag=16XB", sync, 400},
      {"/primary?lag=-1", primary(), 400},
  };
  for (const auto& c : cases) {
    auto r = route(get(c.target), c.status, {});
    EXPECT_EQ(r.reply.status, c.code) << c.target << " as " << roleName(c.status.role) << ": " << r.reply.body;
    EXPECT_FALSE(r.switchover);
  }
}

// A standby cluster's leader (docs/decisions/0083 9.1): never /primary (it is in
// recovery), /standby-leader (and Patroni's /standby_leader) while it streams from its
// source, and a replica for reads; every other peer answers 503 there.
TEST(HttpApi, AStandbyLeaderIsNoPrimary) {
  ApiStatus leader = standby(Role::kStandbyLeader, 0);
  leader.streamingStandbyLeader = true;
  ApiStatus notStreaming = leader;
  notStreaming.streamingReplica = false;
  notStreaming.streamingStandbyLeader = false;
  const std::vector<Case> cases = {
      {"/primary", leader, 503},
      {"/standby-leader", leader, 200},
      {"/standby_leader", leader, 200},
      {"/standby-leader", notStreaming, 503},
      {"/standby-leader", primary(), 503},
      {"/standby-leader", standby(Role::kSync, 0), 503},
      {"/replica", leader, 200},
      {"/read-only", leader, 200},
      {"/readiness", leader, 200},
      {"/sync", leader, 503},
      {"/async", leader, 503},
      {"/primary", notStreaming, 503},
  };
  for (const auto& c : cases) {
    auto r = route(get(c.target), c.status, {});
    EXPECT_EQ(r.reply.status, c.code) << c.target << " as " << roleName(c.status.role) << ": " << r.reply.body;
  }
  auto r = route(get("/primary"), leader, {});
  EXPECT_EQ(nlohmann::json::parse(r.reply.body)["role"], "standby-leader");
}

// Quorum mode (docs/decisions/0079 6.5): GET /quorum on the writable primary gives the
// state's set and k with each member's walsender as postgres shows it; every other peer,
// and a primary in sync mode, answers 503. /sync answers on a streaming member (a member's
// role is sync).
TEST(HttpApi, QuorumAnswersOnTheQuorumPrimaryWithTheSetKAndEachMembersFlush) {
  PeerIdentity a, b, c;
  a.id = "a";
  b.id = "b";
  c.id = "c";
  ClusterState state;
  state.generation = 3;
  state.primary = a;
  state.quorum = Quorum{1, {b, c}};
  pg::PgStatus postgres;
  postgres.currentLsn = "0/5000200";
  // b streams; c's walsender ends while a new one catches up (the streaming one counts
  // only if there is one); d is no member.
  postgres.replication = {{"b", "streaming", "quorum", "0/5000200", "0/5000200", "0/5000200", "0/5000100"},
                          {"c", "catchup", "potential", "0/5000000", std::nullopt, "0/4FFFF00", std::nullopt},
                          {"d", "streaming", "async", "0/5000200", "0/5000200", "0/5000200", "0/5000200"}};
  ApiStatus p = primary();
  p.quorum = apiQuorum(Role::kPrimary, state, postgres);
  ASSERT_TRUE(p.quorum);
  auto r = route(get("/quorum"), p, {});
  ASSERT_EQ(r.reply.status, 200) << r.reply.body;
  const nlohmann::json expected = {
      {"role", "primary"},
      {"quorumPrimary", true},
      {"mode", "quorum"},
      {"k", 1},
      {"readQuorum", 2},
      {"primaryLsn", "0/5000200"},
      {"members",
       {{{"id", "b"}, {"streaming", true}, {"state", "streaming"}, {"syncState", "quorum"}, {"flushLsn", "0/5000200"}},
        {{"id", "c"}, {"streaming", false}, {"state", "catchup"}, {"syncState", "potential"}, {"flushLsn", "0/4FFFF00"}}}}};
  EXPECT_EQ(nlohmann::json::parse(r.reply.body), expected);
  // A member with no walsender at all: nulls.
  postgres.replication.erase(postgres.replication.begin() + 1);
  p.quorum = apiQuorum(Role::kPrimary, state, postgres);
  auto gone = nlohmann::json::parse(route(get("/quorum"), p, {}).reply.body);
  EXPECT_EQ(gone["members"][1], nlohmann::json({{"id", "c"}, {"streaming", false}, {"state", nullptr},
                                                {"syncState", nullptr}, {"flushLsn", nullptr}}));
  // Not the quorum primary: no set to show.
  EXPECT_FALSE(apiQuorum(Role::kSync, state, postgres));
  ClusterState syncMode = state;
  syncMode.quorum.reset();
  syncMode.sync = b;
  EXPECT_FALSE(apiQuorum(Role::kPrimary, syncMode, postgres));
  ApiStatus member = standby(Role::kSync, 0);
  member.quorum = apiQuorum(Role::kSync, state, postgres);
  ApiStatus readOnly = down(Role::kPrimary);
  readOnly.quorum = p.quorum;
  const std::vector<Case> cases = {
      {"/quorum", primary(), 503},  // sync mode
      {"/quorum", member, 503},     // a member
      {"/quorum", readOnly, 503},   // not writable
      {"/sync", member, 200},
  };
  for (const auto& k : cases) {
    EXPECT_EQ(route(get(k.target), k.status, {}).reply.status, k.code) << k.target << " as " << roleName(k.status.role);
  }
}

TEST(HttpApi, ErrorsAreJsonWithAReason) {
  auto r = route(get("/replica?lag=12 parsecs"), standby(Role::kSync, 0), {});
  ASSERT_EQ(r.reply.status, 400);
  auto j = nlohmann::json::parse(r.reply.body);
  EXPECT_NE(j["error"].get<std::string>().find("unknown unit"), std::string::npos) << r.reply.body;
  auto lagging = route(get("/replica?lag=1kB"), standby(Role::kAsync, 4096), {});
  EXPECT_EQ(nlohmann::json::parse(lagging.reply.body)["reason"], "lag 4096 bytes is over the cut-off of 1024");
  auto headPost = get("/primary");
  headPost.method = "POST";
  EXPECT_EQ(route(headPost, primary(), {}).reply.status, 405);
  headPost.method = "HEAD";
  EXPECT_EQ(route(headPost, primary(), {}).reply.status, 200);
}

TEST(HttpApi, ParsesSizes) {
  const std::vector<std::pair<const char*, uint64_t>> good = {
      {"0", 0}, {"1024", 1024}, {"16MB", 16u << 20}, {"16mb", 16u << 20}, {"1 GB", 1u << 30},
      {"512kB", 512u << 10}, {"2TB", 2ull << 40}, {"7B", 7}};
  for (const auto& [text, bytes] : good) {
    auto v = parseSize(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.error();
    EXPECT_EQ(*v, bytes) << text;
  }
  for (const char* bad : {"", "MB", "-1", "1.5GB", "16 XB", "99999999999999999999", "20000000TB"}) {
    EXPECT_FALSE(parseSize(bad).ok()) << bad;
  }
}

HttpRequest post(const std::string& path, const std::string& body, const std::string& authorization) {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body;
  r.authorization = authorization;
  return r;
}

const ApiAccess kOn{std::string("s3cret")};
const std::string kBearer = "Bearer s3cret";
const std::string kBasic = "Basic YWRtaW46czNjcmV0";  // admin:s3cret

struct PostCase {
  HttpRequest request;
  ApiAccess access;
  int code;                 // 0: accepted
  const char* action = "";  // /restart, /reload: what was accepted
};

TEST(HttpApi, SwitchoverNeedsTheCredentialAndABody) {
  const std::vector<PostCase> cases = {
      {post("/switchover", R"({"candidate":"c"})", kBearer), {}, 403},
      {post("/switchover", R"({"candidate":"c"})", ""), kOn, 401},
      {post("/switchover", R"({"candidate":"c"})", "Bearer wrong"), kOn, 401},
      {post("/switchover", R"({"candidate":"c"})", "Bearer s3cre"), kOn, 401},
      {post("/switchover", R"({"candidate":"c"})", "Basic YWRtaW46d3Jvbmc="), kOn, 401},  // admin:wrong
      {post("/switchover", R"({"candidate":"c"})", "Basic !!!"), kOn, 401},
      {post("/switchover", R"({"candidate":"c"})", "Digest s3cret"), kOn, 401},
      {post("/switchover", "not json", kBearer), kOn, 400},
      {post("/switchover", R"(["c"])", kBearer), kOn, 400},
      {post("/switchover", R"({"candidate":""})", kBearer), kOn, 400},
      {post("/switchover", R"({"candidate":3})", kBearer), kOn, 400},
      {post("/switchover", R"({"candidate":"c","when":"now"})", kBearer), kOn, 400},
      {post("/switchover", R"({"candidate":"c"})", kBearer), kOn, 0},
      {post("/switchover", R"({"candidate":"c"})", kBasic), kOn, 0},
  };
  for (const auto& c : cases) {
    auto r = route(c.request, primary(), c.access);
    EXPECT_FALSE(r.operatorAction) << c.request.path;
    if (c.code == 0) {
      ASSERT_TRUE(r.switchover) << c.request.authorization << " " << c.request.body << ": " << r.reply.body;
      EXPECT_EQ(r.switchover->candidate, "c") << c.request.body;
      EXPECT_FALSE(r.switchover->leader) << c.request.body;
    } else {
      EXPECT_FALSE(r.switchover) << c.request.path << " " << c.request.body;
      EXPECT_EQ(r.reply.status, c.code) << c.request.path << " " << c.request.authorization << " " << c.request.body;
      EXPECT_TRUE(nlohmann::json::parse(r.reply.body).contains("error")) << r.reply.body;
    }
  }
  auto g = get("/switchover");
  EXPECT_EQ(route(g, primary(), kOn).reply.status, 405);
}

// Patroni's body: "leader" (the primary, checked by the switchover: 412 when it is not)
// with or without "candidate"; its "scheduled_at" is refused with the way to schedule.
TEST(HttpApi, SwitchoverTakesPatronisLeaderKey) {
  struct Accepted {
    const char* body;
    std::optional<std::string> candidate, leader;
  };
  for (const Accepted& c : {Accepted{R"({"leader":"a","candidate":"c"})", "c", "a"},
                            Accepted{R"({"leader":"a"})", std::nullopt, "a"},
                            Accepted{R"({"candidate":"c","leader":"a"})", "c", "a"}}) {
    auto r = route(post("/switchover", c.body, kBearer), primary(), kOn);
    ASSERT_TRUE(r.switchover) << c.body << ": " << r.reply.body;
    EXPECT_EQ(r.switchover->candidate, c.candidate) << c.body;
    EXPECT_EQ(r.switchover->leader, c.leader) << c.body;
  }
  struct Bad {
    const char* body;
    const char* error;
  };
  for (const Bad& b :
       {Bad{"{}", R"(expected {"candidate": "<peer id>"} or {"leader": "<primary id>"}, or both, found {})"},
        Bad{R"({"leader":""})", R"("leader" must be a peer id (a non-empty string), found "")"},
        Bad{R"({"leader":1,"candidate":"c"})", R"("leader" must be a peer id (a non-empty string), found 1)"},
        Bad{R"({"leader":"a","member":"c"})", R"(unknown key "member" (known: leader, candidate))"},
        Bad{R"({"leader":"a","scheduled_at":"2026-11-29T22:00:00Z"})",
            R"("scheduled_at" is not supported: schedule the switchover with `dugong-adm switchover --scheduled TIME`)"}}) {
    auto r = route(post("/switchover", b.body, kBearer), primary(), kOn);
    EXPECT_FALSE(r.switchover) << b.body;
    EXPECT_EQ(r.reply.status, 400) << b.body;
    EXPECT_EQ(nlohmann::json::parse(r.reply.body).value("error", ""), b.error) << b.body;
  }
}

// The bearer token is never asked of POST /failsafe (a primary never sends it: it would
// travel to its sync, across hosts): the request is the agent's to authenticate, by the
// peer key (agent/failsafe_message.h). Routing only parses the body.
TEST(HttpApi, FailsafeIsRoutedOnAWellFormedBodyWhateverTheCredential) {
  const FailsafeCall asked{"c1", driver::FailsafeRequest{7, "node1", 4000}, "node2", "n0nce", ""};
  const std::string body = failsafeBody(asked, std::nullopt);
  const std::vector<PostCase> cases = {
      {post("/failsafe", body, ""), {}, 0},
      {post("/failsafe", body, ""), kOn, 0},
      {post("/failsafe", body, "Bearer wrong"), kOn, 0},
      {post("/failsafe", "not json", kBearer), kOn, 400},
      {post("/failsafe", R"({"cluster":"c1","generation":"7","primary":"node1","durationMs":4000})", ""), {}, 400},
      {post("/failsafe", R"({"cluster":"c1","generation":7,"primary":"node1"})", ""), {}, 400},
      {post("/failsafe", R"({"cluster":"c1","generation":7,"primary":"node1","durationMs":4000,"x":1})", ""), {}, 400},
      {post("/failsafe", R"({"cluster":"c1","generation":7,"primary":"node1","durationMs":4000,"mac":1})", ""), {}, 400},
  };
  for (const auto& c : cases) {
    auto r = route(c.request, standby(Role::kSync, 0), c.access);
    EXPECT_FALSE(r.switchover);
    EXPECT_FALSE(r.operatorAction);
    if (c.code == 0) {
      ASSERT_TRUE(r.failsafe) << c.request.body << ": " << r.reply.body;
      EXPECT_EQ(r.failsafe->cluster, "c1");
      EXPECT_EQ(r.failsafe->request.generation, 7);
      EXPECT_EQ(r.failsafe->request.primaryId, "node1");
      EXPECT_EQ(r.failsafe->request.durationMs, 4000);
      EXPECT_EQ(r.failsafe->granter, "node2");
      EXPECT_EQ(r.failsafe->nonce, "n0nce");
    } else {
      EXPECT_FALSE(r.failsafe) << c.request.body;
      EXPECT_EQ(r.reply.status, c.code) << c.request.authorization << " " << c.request.body;
    }
  }
  EXPECT_EQ(route(get("/failsafe"), primary(), {}).reply.status, 405);
}

TEST(HttpApi, RestartAndReloadNeedTheCredentialAndNoBody) {
  auto getRestart = get("/restart");
  auto putReload = post("/reload", "", kBearer);
  putReload.method = "PUT";
  const std::vector<PostCase> cases = {
      {post("/restart", "", kBearer), {}, 403},
      {post("/reload", "", kBearer), {}, 403},
      {post("/restart", "", ""), kOn, 401},
      {post("/reload", "", ""), kOn, 401},
      {post("/restart", "", "Bearer wrong"), kOn, 401},
      {post("/reload", "", "Basic YWRtaW46d3Jvbmc="), kOn, 401},  // admin:wrong
      {getRestart, kOn, 405},
      {putReload, kOn, 405},
      {post("/restart", "now", kBearer), kOn, 400},
      {post("/restart", "[]", kBearer), kOn, 400},
      {post("/restart", R"({"role":"replica"})", kBearer), kOn, 400},  // Patroni's conditions: not known here
      {post("/reload", R"({"schedule":"2026-01-01T00:00:00Z"})", kBearer), kOn, 400},
      {post("/restart", "", kBearer), kOn, 0, "restart"},
      {post("/restart", " {} \n", kBasic), kOn, 0, "restart"},
      {post("/reload", "", kBasic), kOn, 0, "reload"},
      {post("/reload", "{}", kBearer), kOn, 0, "reload"},
  };
  for (const auto& c : cases) {
    // Routing does not look at the role: a standby and the primary alike (the decision
    // for the primary is the agent's, docs/design.md).
    for (const ApiStatus& s : {primary(), standby(Role::kSync, 0), down(Role::kAsync)}) {
      auto r = route(c.request, s, c.access);
      const std::string what = c.request.method + " " + c.request.path + " " + c.request.authorization + " " +
                               c.request.body + " as " + roleName(s.role) + ": " + r.reply.body;
      EXPECT_FALSE(r.switchover) << what;
      if (c.code == 0) {
        EXPECT_EQ(r.operatorAction, c.action) << what;
        continue;
      }
      EXPECT_FALSE(r.operatorAction) << what;
      EXPECT_EQ(r.reply.status, c.code) << what;
      auto j = nlohmann::json::parse(r.reply.body, nullptr, false);
      ASSERT_TRUE(j.is_object() && j.contains("error")) << what;
    }
  }
}

}  // namespace
}  // namespace dugong::agent
