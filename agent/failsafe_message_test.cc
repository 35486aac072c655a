// The failsafe's messages and their authentication, as values: what the granter accepts
// and what the requester believes, for honest, changed, forged and replayed messages.
#include "agent/failsafe_message.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dugong::agent {
namespace {

const PeerKey kKey(std::string(64, 'a'));
const PeerKey kOtherKey(std::string(64, 'b'));

FailsafeCall requestCall(const std::string& nonce = "6e6f6e6365") {
  return FailsafeCall{"c1", driver::FailsafeRequest{7, "p1", 9000}, "s1", nonce, ""};
}

// The call as the granter reads it off the wire.
FailsafeCall received(const FailsafeCall& sent, const std::optional<PeerKey>& key) {
  auto parsed = parseFailsafeBody(failsafeBody(sent, key));
  EXPECT_TRUE(parsed.ok()) << parsed.error();
  return parsed.ok() ? *parsed : FailsafeCall{};
}

HttpResponse answered(const FailsafeCall& call, const driver::FailsafeAnswer& a, const std::optional<PeerKey>& key) {
  return HttpResponse{200, failsafeReply(call, a, key).body};
}

TEST(FailsafeMessage, TheGranterAcceptsOnlyARequestItsKeyVouchesFor) {
  EXPECT_TRUE(acceptFailsafeCall(received(requestCall(), kKey), "c1", "s1", kKey).ok());
  // Without a key on either side (one host): accepted unauthenticated.
  EXPECT_TRUE(acceptFailsafeCall(received(requestCall(), std::nullopt), "c1", "s1", std::nullopt).ok());

  auto noMac = acceptFailsafeCall(received(requestCall(), std::nullopt), "c1", "s1", kKey);
  ASSERT_FALSE(noMac.ok());
  EXPECT_NE(noMac.error().find("no MAC"), std::string::npos) << noMac.error();
  auto otherKey = acceptFailsafeCall(received(requestCall(), kOtherKey), "c1", "s1", kKey);
  ASSERT_FALSE(otherKey.ok());
  EXPECT_NE(otherKey.error().find("does not match"), std::string::npos) << otherKey.error();
  // A field changed on the way: the longer promise, or another generation.
  for (auto change : {+[](FailsafeCall& c) { c.request.durationMs = 60000; },
                      +[](FailsafeCall& c) { c.request.generation = 8; },
                      +[](FailsafeCall& c) { c.request.primaryId = "p2"; }, +[](FailsafeCall& c) { c.nonce = "00"; }}) {
    FailsafeCall c = received(requestCall(), kKey);
    change(c);
    EXPECT_FALSE(acceptFailsafeCall(c, "c1", "s1", kKey).ok()) << failsafeBody(c, std::nullopt);
  }
  // Meant for another peer, or another cluster: refused, key or none.
  EXPECT_FALSE(acceptFailsafeCall(received(requestCall(), kKey), "c1", "s2", kKey).ok());
  EXPECT_FALSE(acceptFailsafeCall(received(requestCall(), std::nullopt), "c2", "s1", std::nullopt).ok());
}

// A release travels with its promote request, both under the MAC: a request for a
// promise cannot be turned into a release on the way, nor a release moved to another
// switchover.
TEST(FailsafeMessage, AReleaseArrivesAsSentAndItsFieldsAreUnderTheMac) {
  FailsafeCall release = requestCall();
  release.request = driver::FailsafeRequest::releaseFor(7, "p1", R"({"id":"s1","role":"sync"})");
  const FailsafeCall got = received(release, kKey);
  EXPECT_TRUE(got.request.release);
  EXPECT_EQ(got.request.promote, release.request.promote);
  EXPECT_EQ(got.request.durationMs, 0);
  EXPECT_TRUE(acceptFailsafeCall(got, "c1", "s1", kKey).ok());
  for (auto change : {+[](FailsafeCall& c) { c.request.promote = R"({"id":"s2","role":"sync"})"; },
                      +[](FailsafeCall& c) { c.request.release = false; }}) {
    FailsafeCall c = got;
    change(c);
    EXPECT_FALSE(acceptFailsafeCall(c, "c1", "s1", kKey).ok()) << failsafeBody(c, std::nullopt);
  }
  FailsafeCall grant = received(requestCall(), kKey);
  grant.request.release = true;
  EXPECT_FALSE(acceptFailsafeCall(grant, "c1", "s1", kKey).ok());
  // A release flag that is not a boolean is refused with the expected form.
  auto bad = parseFailsafeBody(R"({"cluster":"c1","generation":7,"primary":"p1","durationMs":0,"release":"yes"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("release"), std::string::npos) << bad.error();
}

TEST(FailsafeMessage, TheRequesterBelievesOnlyTheAnswerToItsOwnRequestUnderItsKey) {
  const FailsafeCall mine = requestCall("aaaa");
  const driver::FailsafeAnswer grant{true, "promised"};
  auto honest = parseFailsafeReply(answered(mine, grant, kKey), mine, kKey);
  ASSERT_TRUE(honest.ok()) << honest.error();
  EXPECT_TRUE(honest->granted);
  EXPECT_EQ(honest->reason, "promised");
  auto refusal = parseFailsafeReply(answered(mine, driver::FailsafeAnswer{false, "reaches it"}, kKey), mine, kKey);
  ASSERT_TRUE(refusal.ok()) << refusal.error();
  EXPECT_FALSE(refusal->granted);

  // A grant to an earlier request, replayed: another nonce.
  auto replay = parseFailsafeReply(answered(requestCall("bbbb"), grant, kKey), mine, kKey);
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.error().find("replay"), std::string::npos) << replay.error();
  // The same with the nonce rewritten to this request's: the MAC no longer matches.
  auto rewritten = nlohmann::json::parse(answered(requestCall("bbbb"), grant, kKey).body);
  rewritten["nonce"] = "aaaa";
  EXPECT_FALSE(parseFailsafeReply(HttpResponse{200, rewritten.dump()}, mine, kKey).ok());
  // A refusal turned into a grant on the way.
  auto flipped = nlohmann::json::parse(answered(mine, driver::FailsafeAnswer{false, "reaches it"}, kKey).body);
  flipped["granted"] = true;
  EXPECT_FALSE(parseFailsafeReply(HttpResponse{200, flipped.dump()}, mine, kKey).ok());
  // Under another key, without a MAC, or the request's own MAC given as the answer's.
  EXPECT_FALSE(parseFailsafeReply(answered(mine, grant, kOtherKey), mine, kKey).ok());
  auto noMac = parseFailsafeReply(answered(mine, grant, std::nullopt), mine, kKey);
  ASSERT_FALSE(noMac.ok());
  EXPECT_NE(noMac.error().find("no MAC"), std::string::npos) << noMac.error();
  nlohmann::json reflected = {{"granted", true}, {"reason", ""}, {"nonce", "aaaa"},
                              {"mac", nlohmann::json::parse(failsafeBody(mine, kKey))["mac"]}};
  EXPECT_FALSE(parseFailsafeReply(HttpResponse{200, reflected.dump()}, mine, kKey).ok());

  // Without a key (one host): believed as it comes; errors stay errors.
  EXPECT_TRUE(parseFailsafeReply(answered(mine, grant, std::nullopt), mine, std::nullopt).ok());
  EXPECT_FALSE(parseFailsafeReply(HttpResponse{401, R"({"error":"refused"})"}, mine, std::nullopt).ok());
  EXPECT_FALSE(parseFailsafeReply(HttpResponse{200, "{}"}, mine, std::nullopt).ok());
}

// A request replayed to the granter: seen once; the memory is bounded, oldest out first.
TEST(FailsafeMessage, TheGranterTellsAReplayedNonce) {
  SeenNonces seen;
  EXPECT_TRUE(seen.firstSight("n1"));
  EXPECT_FALSE(seen.firstSight("n1"));
  EXPECT_TRUE(seen.firstSight("n2"));
  for (size_t i = 0; i < SeenNonces::kRemembered; ++i) EXPECT_TRUE(seen.firstSight("x" + std::to_string(i)));
  EXPECT_TRUE(seen.firstSight("n1"));  // forgotten after kRemembered others
  EXPECT_FALSE(seen.firstSight("x" + std::to_string(SeenNonces::kRemembered - 1)));
}

TEST(FailsafeMessage, TheMacCoversEachFieldWithItsLength) {
  EXPECT_NE(kKey.mac({"ab", "c"}), kKey.mac({"a", "bc"}));
  EXPECT_EQ(kKey.mac({"ab", "c"}).size(), 64u);
  EXPECT_TRUE(kKey.verifies({"ab", "c"}, kKey.mac({"ab", "c"})));
  EXPECT_FALSE(kKey.verifies({"ab", "c"}, kOtherKey.mac({"ab", "c"})));
  EXPECT_FALSE(kKey.verifies({"ab", "c"}, ""));
  EXPECT_NE(freshNonce(), freshNonce());
  EXPECT_EQ(freshNonce().size(), 32u);
}

}  // namespace
}  // namespace dugong::agent
