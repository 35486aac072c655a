#include "statemachine/cluster_state.h"

#include <gtest/gtest.h>

#include <functional>

#include "statemachine/pg_config.h"

namespace dugong {
namespace {

nlohmann::json peer(const std::string& id) {
  return {{"id", id}, {"ip", "10.0.0.1"}, {"pgUrl", "tcp://postgres@10.0.0.1:5432/postgres"}, {"zoneId", id}};
}

nlohmann::json validState() {
  return {{"generation", 3},     {"primary", peer("a")},  {"sync", peer("b")},
          {"async", {peer("c")}}, {"deposed", {peer("d")}}, {"initWal", "0/16B3748"}};
}

std::string errorOf(const nlohmann::json& j) {
  auto s = ClusterState::fromJson(j);
  return s.ok() ? "" : s.error();
}

// A list of peers is written one way: ids comma-separated, in brackets in logs.
TEST(PeerList, IsWrittenAsItsIdsInOrder) {
  PeerList peers(2);
  peers[0].id = "b";
  peers[1].id = "a";
  EXPECT_EQ(peerIds(peers), "b, a");
  EXPECT_EQ(peerIdList(peers), "[b, a]");
  EXPECT_EQ(peerIds({}), "");
  EXPECT_EQ(peerIdList({}), "[]");
}

TEST(ClusterState, RoundTripsThroughJson) {
  nlohmann::json j = validState();
  j["freeze"] = {{"date", "2026-01-01T00:00:00.000Z"}, {"reason", "upgrade"}};
  j["promote"] = {{"id", "c"}};
  j["primary"]["backupUrl"] = "http://10.0.0.1:12345";
  j["initTimeline"] = 4;
  auto s = ClusterState::fromJson(j);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->initTimeline, 4);
  EXPECT_EQ(s->generation, 3);
  EXPECT_EQ(s->primary.id, "a");
  EXPECT_EQ(*s->primary.backupUrl, "http://10.0.0.1:12345");
  EXPECT_EQ(s->sync->id, "b");
  EXPECT_EQ(s->initWal, WalPosition(0x16B3748));
  EXPECT_TRUE(s->frozen());
  EXPECT_TRUE(s->hasPromote());
  j["initWal"] = "0/016b3748";
  EXPECT_EQ(s->toJson(), j);
  EXPECT_EQ(ClusterState::parse(s->serialize())->toJson(), j);
}

// serialize() writes the text itself: the same bytes as the JSON tree's dump(), whatever
// the state holds (every optional field, tags, and strings that need escaping).
TEST(ClusterState, SerializeWritesWhatDumpWrites) {
  auto identity = [](const std::string& id) {
    return PeerIdentity{id, "10.0.0.1", "tcp://postgres@10.0.0.1:5432/postgres", "zone-" + id, std::nullopt, {}};
  };
  std::vector<ClusterState> states;
  states.push_back(ClusterState{});  // empty: no ids, no sync
  ClusterState singleton;
  singleton.primary = identity("a");
  singleton.oneNodeWriteMode = true;
  singleton.initWal = WalPosition(0x16B3748);
  states.push_back(singleton);
  ClusterState chain = singleton;
  chain.oneNodeWriteMode = false;
  chain.generation = 9223372036854775807;
  chain.sync = identity("b");
  chain.sync->backupUrl = "http://10.0.0.2:12345";
  chain.async = {identity("c"), identity("d"), identity("e")};
  chain.async[1].tags.nofailover = true;
  chain.async[2].tags.noloadbalance = true;
  chain.deposed = {identity("f"), identity("g")};
  chain.initTimeline = 7;
  states.push_back(chain);
  ClusterState frozen = chain;
  frozen.freeze = true;
  frozen.promote = {{"id", "c"}, {"role", "async"}, {"asyncIndex", 0}, {"generation", 3}, {"expireTime", 1.5}};
  states.push_back(frozen);
  ClusterState escaped = chain;
  escaped.freeze = {{"date", "2026-11-29T00:00:00.000Z"}, {"reason", "a \"quoted\" \\ reason\n\t\x01\x1f\x7f é 🐚"}};
  escaped.primary.id = "quote\"backslash\\";
  escaped.primary.zoneId = "tab\tnewline\ncontrol\x02";
  escaped.sync->ip = "\xc3\xa9t\xc3\xa9";
  escaped.deposed[0].pgUrl = "\u00fc\b\f\r/";
  escaped.promote = nlohmann::json::array({nullptr, false, -3, "x\"y"});
  states.push_back(escaped);
  ClusterState unfrozen = chain;
  unfrozen.freeze = false;
  states.push_back(unfrozen);
  for (const ClusterState& s : states) EXPECT_EQ(s.serialize(), s.toJson().dump());
  // Invalid UTF-8 is refused as dump() refuses it.
  ClusterState invalid = chain;
  invalid.primary.ip = "\xff";
  EXPECT_THROW(invalid.serialize(), nlohmann::json::type_error);
  EXPECT_THROW(invalid.toJson().dump(), nlohmann::json::type_error);
}

TEST(ClusterState, OptionalFieldsDefault) {
  nlohmann::json j = validState();
  j.erase("deposed");
  j["freeze"] = false;
  j["oneNodeWriteMode"] = nullptr;
  auto s = ClusterState::fromJson(j);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_TRUE(s->deposed.empty());
  EXPECT_FALSE(s->frozen());
  EXPECT_FALSE(s->oneNodeWriteMode);
  EXPECT_EQ(s->initTimeline, 0);
  EXPECT_EQ(s->toJson()["deposed"], nlohmann::json::array());
  EXPECT_FALSE(s->toJson().contains("initTimeline"));
  EXPECT_FALSE(s->toJson().contains("freeze"));
  EXPECT_FALSE(s->toJson().contains("oneNodeWriteMode"));
}

TEST(ClusterState, SyncMayBeNullOnlyInOneNodeWriteMode) {
  nlohmann::json j = validState();
  j["sync"] = nullptr;
  EXPECT_NE(errorOf(j).find("sync may be null only in one-node-write mode"), std::string::npos);
  j["oneNodeWriteMode"] = true;
  EXPECT_EQ(errorOf(j), "");
  EXPECT_TRUE(ClusterState::fromJson(j)->toJson()["oneNodeWriteMode"]);
}

TEST(ClusterState, RejectsSchemaErrorsWithTheirReason) {
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string error;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j = nlohmann::json::array(); }, "expected a JSON object"},
      {[](auto& j) { j.erase("generation"); }, "generation must be an integer"},
      {[](auto& j) { j["generation"] = "3"; }, "generation must be an integer"},
      {[](auto& j) { j["generation"] = 1.5; }, "generation must be an integer"},
      {[](auto& j) { j["generation"] = 0; }, "generation must be at least 1"},
      {[](auto& j) { j.erase("primary"); }, "primary is missing"},
      {[](auto& j) { j["primary"] = "a"; }, "primary: expected a peer identity object"},
      {[](auto& j) { j["primary"].erase("pgUrl"); }, "primary.pgUrl: expected a string"},
      {[](auto& j) { j["primary"]["id"] = ""; }, "primary.id: must not be empty"},
      {[](auto& j) { j["primary"]["backupUrl"] = 5; }, "primary.backupUrl: expected a string"},
      {[](auto& j) { j["sync"] = 5; }, "sync: expected a peer identity object"},
      {[](auto& j) { j["oneNodeWriteMode"] = "yes"; }, "oneNodeWriteMode must be a boolean"},
      {[](auto& j) { j.erase("async"); }, "async is missing"},
      {[](auto& j) { j["async"] = peer("c"); }, "async: expected an array"},
      {[](auto& j) { j["async"][0]["zoneId"] = 1; }, "async[0].zoneId: expected a string"},
      {[](auto& j) { j["deposed"] = {1}; }, "deposed[0]: expected a peer identity object"},
      {[](auto& j) { j.erase("initWal"); }, "initWal must be a string"},
      {[](auto& j) { j["initWal"] = "16B3748"; }, "invalid WAL position"},
      {[](auto& j) { j["initTimeline"] = 0; }, "initTimeline must be an integer of at least 1"},
      {[](auto& j) { j["initTimeline"] = "3"; }, "initTimeline must be an integer of at least 1"},
      {[](auto& j) { j["freeze"] = "yes"; }, "freeze must be true, false or an object"},
      {[](auto& j) { j["async"].push_back(peer("a")); }, "peer \"a\" appears more than once (again as async[1])"},
      {[](auto& j) { j["sync"] = peer("a"); }, "appears more than once (again as sync)"},
      {[](auto& j) { j["deposed"].push_back(peer("c")); }, "appears more than once (again as deposed[1])"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = validState();
    c.mutate(j);
    std::string err = errorOf(j);
    EXPECT_NE(err.find(c.error), std::string::npos) << "got: \"" << err << "\" want: " << c.error;
    EXPECT_EQ(err.rfind("cluster state", 0), 0u) << err;
  }
}

TEST(ClusterState, AFormatNewerThanThisBuildIsRefused) {
  nlohmann::json j = validState();
  j["format"] = 1;
  EXPECT_EQ(errorOf(j), "");
  EXPECT_FALSE(ClusterState::fromJson(j)->toJson().contains("format"));  // format 1 writes Manatee's fields only
  j["format"] = 2;
  EXPECT_NE(errorOf(j).find("format 2 is newer than the format 1 this dugong knows"), std::string::npos) << errorOf(j);
  j["format"] = "x";
  EXPECT_EQ(errorOf(j), "cluster state: format must be an integer of at least 1");
}

TEST(ClusterState, ParseRejectsMalformedJson) {
  auto s = ClusterState::parse("{\"generation\": 1,");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error(), "cluster state: not valid JSON");
}

TEST(ClusterState, SummaryNamesPeersById) {
  nlohmann::json j = validState();
  j["freeze"] = true;
  j["oneNodeWriteMode"] = true;
  j["promote"] = {{"id", "c"}};
  auto s = summarizeState(*ClusterState::fromJson(j));
  EXPECT_EQ(s["primary"], "a");
  EXPECT_EQ(s["sync"], "b");
  EXPECT_EQ(s["async"], nlohmann::json({"c"}));
  EXPECT_EQ(s["deposed"], nlohmann::json({"d"}));
  EXPECT_EQ(s["initWal"], "0/016b3748");
  EXPECT_EQ(s["freeze"], true);
  EXPECT_EQ(s["oneNodeWriteMode"], true);
  EXPECT_EQ(s["promote"]["id"], "c");
  j["sync"] = nullptr;
  EXPECT_TRUE(summarizeState(*ClusterState::fromJson(j))["sync"].is_null());
}

TEST(PgConfig, SerializesEveryRole) {
  auto a = *PeerIdentity::fromJson(peer("a"), "a");
  auto b = *PeerIdentity::fromJson(peer("b"), "b");
  EXPECT_EQ(PgConfig::none().toJson()["role"], "none");
  EXPECT_EQ(PgConfig::primary(b).toJson()["downstream"]["id"], "b");
  EXPECT_TRUE(PgConfig::primary(std::nullopt).toJson()["downstream"].is_null());
  auto sync = PgConfig::standby(PgRole::kSync, a, a);
  EXPECT_EQ(sync.toJson()["role"], "sync");
  EXPECT_EQ(sync.toJson()["upstream"]["id"], "a");
  EXPECT_EQ(sync.toJson()["restorePeer"]["id"], "a");
  EXPECT_EQ(PgConfig::standby(PgRole::kAsync, b, a).toJson()["role"], "async");
  EXPECT_FALSE(PgConfig::standby(PgRole::kAsync, b, a) == PgConfig::standby(PgRole::kAsync, a, a));
  EXPECT_TRUE(PgConfig::primary(b) == PgConfig::primary(b));
}

TEST(PeerIdentity, ListHelpers) {
  auto list = *peersFromJson(nlohmann::json::array({peer("a"), peer("b")}), "list");
  EXPECT_TRUE(containsPeer(list, "b"));
  EXPECT_FALSE(containsPeer(list, "z"));
  EXPECT_EQ(indexOfPeer(list, "b"), 1);
  EXPECT_EQ(indexOfPeer(list, "z"), -1);
  EXPECT_EQ(peersToJson(list)[1]["id"], "b");
  EXPECT_TRUE(list[0].sameAs(*PeerIdentity::fromJson(peer("a"), "x")));
}

}  // namespace
}  // namespace dugong
