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

// 0079's example of a quorum state (section 2): format 2, sync null, ANY 1 (b, c).
nlohmann::json quorumState() {
  nlohmann::json j = validState();
  j["format"] = 2;
  j["sync"] = nullptr;
  j["async"] = nlohmann::json::array({peer("e")});  // not {peer("e")}: clang reads that as a copy
  j["quorum"] = {{"k", 1}, {"members", {peer("b"), peer("c")}}};
  return j;
}

// What fromJson says, quorum mode taken (the rules of both formats).
std::string errorOf(const nlohmann::json& j) {
  auto s = ClusterState::fromJson(j, ClusterState::Formats::kSyncAndQuorum);
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
  ClusterState quorum = frozen;
  quorum.sync.reset();
  quorum.quorum = Quorum{2, {identity("h"), identity("i"), identity("j")}};
  quorum.quorum->members[1].tags.nofailover = true;
  states.push_back(quorum);
  ClusterState quorumEscaped = escaped;
  quorumEscaped.sync.reset();
  quorumEscaped.quorum = Quorum{1, {identity("m\"1")}};
  states.push_back(quorumEscaped);
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

// A format newer than this build knows is refused, whatever the rest holds, as builds of
// format 1 refuse format 2 (peer_test.cc, Peer.AStateOfANewerFormatHaltsThePeerWithAClearError).
TEST(ClusterState, AFormatNewerThanThisBuildIsRefused) {
  nlohmann::json j = validState();
  j["format"] = 1;
  EXPECT_EQ(errorOf(j), "");
  EXPECT_FALSE(ClusterState::fromJson(j)->toJson().contains("format"));  // format 1 writes Manatee's fields only
  for (const nlohmann::json& newer : {validState(), quorumState()}) {
    j = newer;
    j["format"] = 3;
    EXPECT_EQ(errorOf(j),
              "cluster state: format 3 is newer than the format 2 this dugong knows (written by a newer version); "
              "upgrade this dugong: nothing is done with it");
  }
  j["format"] = "x";
  EXPECT_EQ(errorOf(j), "cluster state: format must be an integer of at least 1");
  j["format"] = 0;
  EXPECT_EQ(errorOf(j), "cluster state: format must be an integer of at least 1");
}

// A sync-mode state is written as Manatee's fields, byte for byte as before quorum mode
// existed: no "format", no "quorum" (the conformance scenarios compare these bytes too).
TEST(ClusterState, SyncModeBytesAreUnchanged) {
  nlohmann::json j = validState();
  j["initTimeline"] = 2;
  auto s = ClusterState::fromJson(j);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(s->quorum.has_value());
  EXPECT_EQ(s->format(), 1);
  const std::string manatee =
      "{\"async\":[{\"id\":\"c\",\"ip\":\"10.0.0.1\",\"pgUrl\":\"tcp://postgres@10.0.0.1:5432/postgres\","
      "\"zoneId\":\"c\"}],\"deposed\":[{\"id\":\"d\",\"ip\":\"10.0.0.1\",\"pgUrl\":"
      "\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"d\"}],\"generation\":3,\"initTimeline\":2,"
      "\"initWal\":\"0/016b3748\",\"primary\":{\"id\":\"a\",\"ip\":\"10.0.0.1\",\"pgUrl\":"
      "\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"a\"},\"sync\":{\"id\":\"b\",\"ip\":\"10.0.0.1\","
      "\"pgUrl\":\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"b\"}}";
  EXPECT_EQ(s->serialize(), manatee);
  EXPECT_EQ(s->toJson().dump(), manatee);
  EXPECT_FALSE(summarizeState(*s).contains("format"));
  EXPECT_FALSE(summarizeState(*s).contains("quorum"));
  // One-node-write mode too: sync null, no quorum.
  j["sync"] = nullptr;
  j["oneNodeWriteMode"] = true;
  EXPECT_EQ(ClusterState::fromJson(j)->serialize().find("format"), std::string::npos);
  EXPECT_EQ(ClusterState::fromJson(j)->serialize().find("quorum"), std::string::npos);
}

// Format 2 (docs/decisions/0079-quorum-commit.md section 2): read, written back as it
// was, by toJson() and serialize() alike, and summarized with the members' ids.
TEST(ClusterState, AQuorumStateRoundTrips) {
  constexpr auto kQuorum = ClusterState::Formats::kSyncAndQuorum;
  nlohmann::json j = quorumState();
  j["quorum"]["members"][1]["tags"] = {{"nofailover", true}, {"noloadbalance", false}};
  j["initTimeline"] = 5;
  auto s = ClusterState::fromJson(j, kQuorum);
  ASSERT_TRUE(s.ok()) << s.error();
  ASSERT_TRUE(s->quorum.has_value());
  EXPECT_EQ(s->format(), 2);
  EXPECT_EQ(s->quorum->k, 1);
  EXPECT_EQ(peerIds(s->quorum->members), "b, c");
  EXPECT_TRUE(s->quorum->members[1].tags.nofailover);
  EXPECT_FALSE(s->sync.has_value());
  j["initWal"] = "0/016b3748";
  EXPECT_EQ(s->toJson(), j);
  EXPECT_EQ(s->serialize(), j.dump());
  auto again = ClusterState::parse(s->serialize(), kQuorum);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->toJson(), j);
  // The keys in their sorted place: format after deposed, quorum after primary (and promote).
  const std::string text = s->serialize();
  EXPECT_LT(text.find("\"deposed\""), text.find("\"format\":2"));
  EXPECT_LT(text.find("\"format\":2"), text.find("\"generation\""));
  EXPECT_LT(text.find("\"primary\""), text.find("\"quorum\":{\"k\":1,\"members\":[{"));
  EXPECT_LT(text.find("\"quorum\""), text.find("\"sync\":null"));
  auto summary = summarizeState(*s);
  EXPECT_EQ(summary["format"], 2);
  EXPECT_EQ(summary["quorum"], nlohmann::json({{"k", 1}, {"members", {"b", "c"}}}));
  EXPECT_TRUE(summary["sync"].is_null());
  // k may equal the number of members (transiently, while the set is short of members).
  j["quorum"]["k"] = 2;
  EXPECT_EQ(errorOf(j), "");
}

// Until quorum mode runs end to end, every reader but the quorum rules refuses a valid
// format-2 state, as a build of format 1 does: the agent, the driver and dugong-adm act on
// none (the same text is refused after it was read with quorum mode taken: the parse cache
// keeps the two apart).
TEST(ClusterState, AQuorumStateIsRefusedByTheSyncModeReaders) {
  const std::string text = quorumState().dump();
  ASSERT_TRUE(ClusterState::parse(text, ClusterState::Formats::kSyncAndQuorum).ok());
  for (const auto& s : {ClusterState::parse(text), ClusterState::fromJson(quorumState())}) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error(),
              "cluster state: format 2 (quorum mode, docs/decisions/0079) is not run by this dugong yet: nothing is done "
              "with it");
  }
}

TEST(ClusterState, AQuorumStateIsRefusedWithItsReason) {
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string error;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j.erase("quorum"); }, "cluster state: format 2 needs the quorum field ({\"k\": 1, \"members\": [...]})"},
      {[](auto& j) { j["quorum"] = nullptr; }, "cluster state: format 2 needs the quorum field"},
      {[](auto& j) { j.erase("format"); }, "cluster state: the quorum field needs format 2"},
      {[](auto& j) { j["format"] = 1; }, "cluster state: the quorum field needs format 2"},
      {[](auto& j) { j["sync"] = peer("f"); },
       "cluster state: sync must be null in a format 2 state (its synchronous standbys are quorum.members)"},
      {[](auto& j) {
         j["oneNodeWriteMode"] = true;
       },
       "cluster state: a format 2 state cannot be in one-node-write mode (one-node-write mode has no quorum)"},
      {[](auto& j) { j["quorum"] = nlohmann::json::array({peer("b")}); }, "cluster state: quorum must be an object like {\"k\": 1, \"members\": [...]}"},
      {[](auto& j) { j["quorum"].erase("members"); }, "cluster state: quorum.members is missing"},
      {[](auto& j) { j["quorum"]["members"] = peer("b"); }, "cluster state: quorum.members: expected an array"},
      {[](auto& j) { j["quorum"]["members"][1] = "c"; }, "cluster state: quorum.members[1]: expected a peer identity object"},
      {[](auto& j) { j["quorum"]["members"][0].erase("ip"); }, "cluster state: quorum.members[0].ip: expected a string"},
      {[](auto& j) { j["quorum"]["members"] = nlohmann::json::array(); },
       "cluster state: quorum.members must name at least one peer"},
      {[](auto& j) { j["quorum"].erase("k"); }, "cluster state: quorum.k must be an integer from 1 to the number of members (2)"},
      {[](auto& j) { j["quorum"]["k"] = 0; }, "cluster state: quorum.k must be an integer from 1 to the number of members (2)"},
      {[](auto& j) { j["quorum"]["k"] = 3; }, "cluster state: quorum.k must be an integer from 1 to the number of members (2)"},
      {[](auto& j) { j["quorum"]["k"] = 1.5; }, "cluster state: quorum.k must be an integer from 1 to the number of members (2)"},
      {[](auto& j) { j["quorum"]["k"] = "1"; }, "cluster state: quorum.k must be an integer from 1 to the number of members (2)"},
      {[](auto& j) { j["quorum"]["members"].push_back(peer("b")); },
       "cluster state: peer \"b\" appears more than once (again as quorum.members[2])"},
      {[](auto& j) { j["quorum"]["members"][1] = peer("a"); },
       "cluster state: peer \"a\" appears more than once (again as quorum.members[1])"},
      {[](auto& j) { j["async"].push_back(peer("c")); }, "cluster state: peer \"c\" appears more than once (again as async[1])"},
      {[](auto& j) { j["deposed"].push_back(peer("b")); },
       "cluster state: peer \"b\" appears more than once (again as deposed[1])"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = quorumState();
    c.mutate(j);
    std::string err = errorOf(j);
    EXPECT_EQ(err.rfind(c.error, 0), 0u) << "got: \"" << err << "\" want: " << c.error;
  }
  // A sync-mode state with a null sync names both places a null sync is allowed.
  nlohmann::json j = validState();
  j["sync"] = nullptr;
  EXPECT_EQ(errorOf(j), "cluster state: sync may be null only in one-node-write mode or in a format 2 state");
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
