#include "statemachine/promote_request.h"

#include <gtest/gtest.h>

namespace dugong {
namespace promote_request_test {

constexpr EpochMs kNow = 1767225600000;  // 2026-01-01T00:00:00Z

ClusterState state() {
  auto peer = [](const std::string& id) {
    return nlohmann::json{{"id", id}, {"ip", "i"}, {"pgUrl", "u"}, {"zoneId", id}};
  };
  return *ClusterState::fromJson({{"generation", 4},
                                  {"primary", peer("p")},
                                  {"sync", peer("s")},
                                  {"async", {peer("a0"), peer("a1")}},
                                  {"initWal", "0/0"}});
}

nlohmann::json request(const std::string& id, const std::string& role) {
  return {{"id", id}, {"role", role}, {"generation", 4}, {"expireTime", "2026-01-01T00:01:00Z"}};
}

std::string errorOf(const nlohmann::json& req) {
  auto r = validatePromote(req, state(), kNow);
  return r.ok() ? "" : r.error();
}

TEST(PromoteRequest, AcceptsValidRequests) {
  auto sync = validatePromote(request("s", "sync"), state(), kNow);
  ASSERT_TRUE(sync.ok()) << sync.error();
  EXPECT_EQ(sync->id, "s");
  EXPECT_EQ(sync->role, "sync");
  EXPECT_EQ(sync->expireTime, kNow + 60000);
  auto req = request("a1", "async");
  req["asyncIndex"] = 1;
  auto async = validatePromote(req, state(), kNow);
  ASSERT_TRUE(async.ok()) << async.error();
  EXPECT_EQ(*async->asyncIndex, 1);
  req["expireTime"] = std::to_string(kNow);  // epoch ms; not passed at the very instant
  EXPECT_TRUE(validatePromote(req, state(), kNow).ok());
}

TEST(PromoteRequest, ChecksInTheSpecifiedOrder) {
  struct Case {
    nlohmann::json req;
    std::string error;
  };
  auto with = [](nlohmann::json r, const std::string& k, nlohmann::json v) {
    if (v.is_discarded()) {
      r.erase(k);
    } else {
      r[k] = v;
    }
    return r;
  };
  const nlohmann::json drop = nlohmann::json::value_t::discarded;
  const auto s = request("s", "sync");
  const auto a = with(request("a1", "async"), "asyncIndex", 1);
  std::vector<Case> cases = {
      {"text", "not an object"},
      {with(s, "id", drop), "id must be a string"},
      {with(s, "id", 3), "id must be a string"},
      {with(s, "role", "primary"), "role must be \"sync\" or \"async\""},
      {with(s, "role", drop), "role must be"},
      {with(a, "asyncIndex", "1"), "asyncIndex must be an integer"},
      {with(s, "generation", "4"), "generation must be an integer"},
      {with(s, "generation", drop), "generation must be an integer"},
      {with(s, "expireTime", drop), "expireTime must be a string"},
      {with(s, "expireTime", 5), "expireTime must be a string"},
      // a bad time is reported before a wrong generation
      {with(with(s, "expireTime", "soon"), "generation", 3), "expireTime: invalid time"},
      // a wrong generation before expiry
      {with(with(s, "expireTime", "2020-01-01T00:00:00Z"), "generation", 3), "for generation 3 but the cluster is at 4"},
      {with(s, "expireTime", "2025-12-31T23:59:59.999Z"), "expired at 2025-12-31T23:59:59.999Z"},
      {with(a, "asyncIndex", drop), "needs asyncIndex"},
      {with(a, "asyncIndex", 2), "asyncIndex 2 is out of range (2 asyncs)"},
      {with(a, "asyncIndex", -1), "asyncIndex -1 is out of range"},
      {with(a, "asyncIndex", 0), "async[0] is \"a0\", not \"a1\""},
      {with(s, "id", "a0"), "\"a0\" is not the sync"},
      {with(s, "id", "nobody"), "\"nobody\" is not the sync"},
  };
  for (const auto& c : cases) {
    std::string err = errorOf(c.req);
    EXPECT_NE(err.find(c.error), std::string::npos) << c.req.dump() << " gave \"" << err << "\"";
  }
}

TEST(PromoteRequest, SyncPromotionNeedsASync) {
  ClusterState onwm = state();
  onwm.sync.reset();
  onwm.oneNodeWriteMode = true;
  auto r = validatePromote(request("s", "sync"), onwm, kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("is not the sync"), std::string::npos);
}

}  // namespace promote_request_test
}  // namespace dugong
