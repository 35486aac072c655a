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

// 0083's example of a standby state (section 2.2): format 3, a dugong source with a
// repository, the demotion point, a promote-cluster request.
nlohmann::json standbyState() {
  nlohmann::json j = validState();
  j["format"] = 3;
  j["initTimeline"] = 2;
  j["standby"] = {{"source",
                   {{"kind", "dugong"},
                    {"cluster", "siteA"},
                    {"zookeeper", "a1:2181,a2:2181,a3:2181"},
                    {"chroot", ""},
                    {"root", "/dugong/siteA"},
                    {"restore", {{"stanza", "siteA"}, {"options", {{"repo1-path", "/srv/pgbackrest"}}}}}}},
                  {"demotedAt", {{"wal", "0/4FFFF28"}, {"timeline", 2}}},
                  {"promote",
                   {{"by", "ops@jump1"}, {"sourceGone", false}, {"generation", 3}, {"expireTime", "2026-11-30T00:40:00Z"}}}};
  return j;
}

// A normal state carrying a demote-cluster request: format 3 too.
nlohmann::json demoteState() {
  nlohmann::json j = validState();
  j["format"] = 3;
  j["demote"] = {{"source", {{"kind", "hosts"}, {"hosts", {"b1:5432", "[fd00::2]:5433"}}}},
                 {"by", "ops@jump1"},
                 {"generation", 3},
                 {"expireTime", "2026-11-30T00:40:00Z"}};
  return j;
}

// What fromJson says, standby clusters taken.
std::string standbyErrorOf(const nlohmann::json& j) {
  auto s = ClusterState::fromJson(j, ClusterState::Formats::kSyncAndStandby);
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
  for (const nlohmann::json& j : {standbyState(), demoteState()}) {
    auto s = ClusterState::fromJson(j, ClusterState::Formats::kSyncAndStandby);
    ASSERT_TRUE(s.ok()) << s.error();
    states.push_back(*s);
  }
  ClusterState standbyEscaped = states.back();
  standbyEscaped.demote = nullptr;
  standbyEscaped.standby = ClusterState::fromJson(standbyState(), ClusterState::Formats::kSyncAndStandby)->standby;
  standbyEscaped.standby->source.cluster = "site \"A\"\n\u00e9";
  standbyEscaped.standby->promote = nlohmann::json::array({"x\"y", 1.5});
  standbyEscaped.primary.id = "quote\"backslash\\";
  states.push_back(standbyEscaped);
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
  for (const nlohmann::json& newer : {validState(), quorumState(), standbyState()}) {
    j = newer;
    j["format"] = 4;
    const std::string refused =
        "cluster state: format 4 is newer than the format 3 this dugong knows (written by a newer version); "
        "upgrade this dugong: nothing is done with it";
    EXPECT_EQ(errorOf(j), refused);
    EXPECT_EQ(standbyErrorOf(j), refused);
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

// A reader that does not take quorum mode refuses a valid format-2 state, and says that
// the cluster runs quorum mode, with k and size from the state (the same text is refused after it was read with
// quorum mode taken: the parse cache keeps the two apart).
const std::string kQuorumRefused =
    "cluster state: a quorum-mode cluster (format 2, ANY 1 of 2 members: docs/decisions/0079), which this reader "
    "does not run: nothing is done with it";
TEST(ClusterState, AQuorumStateIsRefusedByTheSyncModeReaders) {
  const std::string text = quorumState().dump();
  ASSERT_TRUE(ClusterState::parse(text, ClusterState::Formats::kSyncAndQuorum).ok());
  for (const auto& s : {ClusterState::parse(text), ClusterState::fromJson(quorumState())}) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error(), kQuorumRefused);
  }
  // A set whose k or members cannot be read: what to set, without numbers.
  nlohmann::json odd = quorumState();
  odd["quorum"] = "three";
  EXPECT_EQ(ClusterState::fromJson(odd).error(),
            "cluster state: a quorum-mode cluster (format 2, docs/decisions/0079), which this reader does not run: "
            "nothing is done with it");
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

// Format 3 (docs/decisions/0083 section 2.2): a standby state and a normal state with a
// demote request are read, written back as they were by toJson() and serialize() alike,
// and summarized.
TEST(ClusterState, AStandbyStateRoundTrips) {
  constexpr auto kStandby = ClusterState::Formats::kSyncAndStandby;
  for (const nlohmann::json& written : {standbyState(), demoteState()}) {
    nlohmann::json j = written;
    auto s = ClusterState::fromJson(j, kStandby);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(s->format(), 3);
    j["initWal"] = "0/016b3748";  // positions are written as WalPosition writes them
    if (j.contains("standby")) j["standby"]["demotedAt"]["wal"] = "0/04ffff28";
    EXPECT_EQ(s->toJson(), j);
    EXPECT_EQ(s->serialize(), j.dump());
    auto again = ClusterState::parse(s->serialize(), kStandby);
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_EQ(again->toJson(), j);
    EXPECT_EQ(summarizeState(*s)["format"], 3);
  }
  auto s = ClusterState::fromJson(standbyState(), kStandby);
  ASSERT_TRUE(s->standby.has_value());
  EXPECT_FALSE(s->hasDemote());
  const StandbySource& source = s->standby->source;
  EXPECT_EQ(source.kind, SourceKind::kDugong);
  EXPECT_EQ(source.cluster, "siteA");
  EXPECT_EQ(source.zookeeperConnect(), "a1:2181,a2:2181,a3:2181");
  EXPECT_EQ(source.root, "/dugong/siteA");
  ASSERT_TRUE(source.restore.has_value());
  EXPECT_EQ(source.restore->options.at("repo1-path"), "/srv/pgbackrest");
  ASSERT_TRUE(s->standby->demotedAt.has_value());
  EXPECT_EQ(s->standby->demotedAt->wal, WalPosition(0x4FFFF28));
  EXPECT_EQ(s->standby->demotedAt->timeline, 2);
  EXPECT_TRUE(s->standby->hasPromote());
  EXPECT_EQ(summarizeState(*s)["standby"]["source"]["cluster"], "siteA");
  // The keys in their sorted place: demote before deposed, format after it, standby after
  // primary and promote, before sync.
  const std::string text = s->serialize();
  EXPECT_LT(text.find("\"deposed\""), text.find("\"format\":3"));
  EXPECT_LT(text.find("\"primary\""), text.find("\"standby\":{\"demotedAt\""));
  EXPECT_LT(text.find("\"standby\""), text.find("\"sync\""));
  auto d = ClusterState::fromJson(demoteState(), kStandby);
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_TRUE(d->hasDemote());
  EXPECT_FALSE(d->standby.has_value());
  const std::string dtext = d->serialize();
  EXPECT_LT(dtext.find("\"async\""), dtext.find("\"demote\":{"));
  EXPECT_LT(dtext.find("\"demote\""), dtext.find("\"deposed\""));
  EXPECT_EQ(summarizeState(*d)["demote"]["by"], "ops@jump1");
  // Without the request the same state is a normal one again: Manatee's bytes.
  ClusterState normal = *d;
  normal.demote = nullptr;
  EXPECT_EQ(normal.format(), 1);
  EXPECT_EQ(normal.serialize(), ClusterState::fromJson(validState())->serialize());
}

// Normal states keep their bytes: format 1 exactly Manatee's (SyncModeBytesAreUnchanged),
// format 2 exactly 0079's, both read the same whichever formats the reader takes.
TEST(ClusterState, NormalBytesAreUnchanged) {
  const std::string manatee = ClusterState::fromJson(validState())->serialize();
  EXPECT_EQ(ClusterState::fromJson(validState(), ClusterState::Formats::kSyncAndStandby)->serialize(), manatee);
  EXPECT_EQ(ClusterState::fromJson(validState(), ClusterState::Formats::kSyncAndQuorum)->serialize(), manatee);
  EXPECT_EQ(manatee.find("format"), std::string::npos);
  EXPECT_EQ(manatee.find("standby"), std::string::npos);
  EXPECT_EQ(manatee.find("demote"), std::string::npos);
  const std::string quorum =
      "{\"async\":[{\"id\":\"e\",\"ip\":\"10.0.0.1\",\"pgUrl\":\"tcp://postgres@10.0.0.1:5432/postgres\","
      "\"zoneId\":\"e\"}],\"deposed\":[{\"id\":\"d\",\"ip\":\"10.0.0.1\",\"pgUrl\":"
      "\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"d\"}],\"format\":2,\"generation\":3,"
      "\"initWal\":\"0/016b3748\",\"primary\":{\"id\":\"a\",\"ip\":\"10.0.0.1\",\"pgUrl\":"
      "\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"a\"},\"quorum\":{\"k\":1,\"members\":[{\"id\":\"b\","
      "\"ip\":\"10.0.0.1\",\"pgUrl\":\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"b\"},{\"id\":\"c\","
      "\"ip\":\"10.0.0.1\",\"pgUrl\":\"tcp://postgres@10.0.0.1:5432/postgres\",\"zoneId\":\"c\"}]},\"sync\":null}";
  auto q = ClusterState::fromJson(quorumState(), ClusterState::Formats::kSyncAndQuorum);
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_EQ(q->serialize(), quorum);
  EXPECT_EQ(q->toJson().dump(), quorum);
}

// Until a standby cluster runs end to end, every reader but standby.h's rules refuses a
// valid format-3 state, as a build of format 2 would (the parse cache keeps the readers
// apart); a quorum reader refuses it too, and a standby reader refuses format 2.
TEST(ClusterState, AStandbyStateIsRefusedByTodaysReaders) {
  const std::string refused =
      "cluster state: format 3 (a standby cluster or a demote-cluster request, docs/decisions/0083) is not run by "
      "this dugong yet: nothing is done with it";
  for (const nlohmann::json& j : {standbyState(), demoteState()}) {
    const std::string text = j.dump();
    ASSERT_TRUE(ClusterState::parse(text, ClusterState::Formats::kSyncAndStandby).ok());
    for (const auto& s : {ClusterState::parse(text), ClusterState::fromJson(j),
                          ClusterState::parse(text, ClusterState::Formats::kSyncAndQuorum)}) {
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error(), refused);
    }
  }
  EXPECT_EQ(standbyErrorOf(quorumState()), kQuorumRefused);
}

// The agent's reader (the state machine's and the driver's, docs/decisions/0089) takes
// every format this build runs: a cluster switches to quorum mode, or becomes a standby
// cluster, without a change to any agent's configuration.
TEST(ClusterState, TheAgentsReaderTakesEveryFormat) {
  constexpr auto kAll = ClusterState::Formats::kAll;
  for (const nlohmann::json& j : {validState(), quorumState(), standbyState(), demoteState()}) {
    auto s = ClusterState::parse(j.dump(), kAll);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(s->serialize(), ClusterState::fromJson(j, kAll)->serialize());
  }
  EXPECT_EQ(ClusterState::parse(quorumState().dump(), kAll)->format(), 2);
  EXPECT_EQ(ClusterState::parse(standbyState().dump(), kAll)->format(), 3);
  nlohmann::json newer = validState();
  newer["format"] = kClusterStateFormat + 1;
  EXPECT_NE(ClusterState::fromJson(newer, kAll).error().find("is newer than the format"), std::string::npos);
}

// Every way a format-3 state can be wrong, with its reason.
TEST(ClusterState, AStandbyStateIsRefusedWithItsReason) {
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string error;
  };
  auto source = [](nlohmann::json& j) -> nlohmann::json& { return j["standby"]["source"]; };
  std::vector<Case> cases = {
      {[](auto& j) { j.erase("standby"); }, "cluster state: format 3 needs the standby field or a demote request"},
      {[](auto& j) { j["standby"] = nullptr; }, "cluster state: format 3 needs the standby field or a demote request"},
      {[](auto& j) { j.erase("format"); }, "cluster state: the standby field needs format 3"},
      {[](auto& j) { j["format"] = 1; }, "cluster state: the standby field needs format 3"},
      {[](auto& j) { j["format"] = 2; }, "cluster state: a quorum-mode cluster (format 2,"},
      {[](auto& j) { j["demote"] = demoteState()["demote"]; },
       "cluster state: a standby state cannot carry a demote request (the cluster is a standby already)"},
      {[](auto& j) {
         j["oneNodeWriteMode"] = true;
         j["sync"] = nullptr;
       },
       "cluster state: a standby state cannot be in one-node-write mode (its leader takes no writes)"},
      {[](auto& j) { j["sync"] = nullptr; }, "cluster state: sync may be null only in one-node-write mode"},
      {[](auto& j) { j["quorum"] = {{"k", 1}, {"members", {peer("e")}}}; },
       "cluster state: the quorum field needs format 2"},
      {[](auto& j) { j["standby"] = "siteA"; }, "cluster state: standby must be an object like {\"source\": {...}}"},
      {[](auto& j) { j["standby"]["lag"] = 5; }, "cluster state: standby: lag is not a field of the standby field"},
      {[](auto& j) { j["standby"].erase("source"); }, "cluster state: standby.source is missing"},
      {[&](auto& j) { source(j) = "dugong://a1:2181/dugong/siteA"; },
       "cluster state: standby.source must be an object like {\"kind\": \"dugong\", ...}"},
      {[&](auto& j) { source(j).erase("kind"); },
       "cluster state: standby.source.kind must be \"dugong\", \"hosts\" or \"pgbackrest\""},
      {[&](auto& j) { source(j)["kind"] = "etcd"; },
       "cluster state: standby.source.kind must be \"dugong\", \"hosts\" or \"pgbackrest\""},
      {[&](auto& j) { source(j)["hosts"] = {"h1:5432"}; },
       "cluster state: standby.source: hosts is not a field of a dugong source"},
      {[&](auto& j) { source(j).erase("cluster"); }, "cluster state: standby.source.cluster must be a string"},
      {[&](auto& j) { source(j)["cluster"] = ""; }, "cluster state: standby.source.cluster must not be empty"},
      {[&](auto& j) { source(j)["zookeeper"] = ""; }, "cluster state: standby.source.zookeeper must not be empty"},
      {[&](auto& j) { source(j)["zookeeper"] = "a1:2181,a2"; },
       "cluster state: standby.source.zookeeper: expected \"host:port\", got \"a2\""},
      {[&](auto& j) { source(j)["zookeeper"] = "a1:2181,"; },
       "cluster state: standby.source.zookeeper: expected \"host:port\", got \"\""},
      {[&](auto& j) { source(j)["zookeeper"] = "a1:70000"; },
       "cluster state: standby.source.zookeeper: port 70000 is out of range (1-65535) in \"a1:70000\""},
      {[&](auto& j) { source(j)["zookeeper"] = "fd00::1:2181"; },
       "cluster state: standby.source.zookeeper: expected \"host:port\", got \"fd00::1:2181\" (an IPv6 address goes "
       "in brackets)"},
      {[&](auto& j) { source(j).erase("chroot"); }, "cluster state: standby.source.chroot must be a string"},
      {[&](auto& j) { source(j)["chroot"] = "site"; },
       "cluster state: standby.source.chroot must be empty or an absolute path like /site, got \"site\""},
      {[&](auto& j) { source(j)["root"] = "dugong/siteA"; },
       "cluster state: standby.source.root must be an absolute path like /dugong/siteA, got \"dugong/siteA\""},
      {[&](auto& j) { source(j)["root"] = "/dugong/siteA/"; },
       "cluster state: standby.source.root must be an absolute path like /dugong/siteA, got \"/dugong/siteA/\""},
      {[&](auto& j) { source(j)["root"] = "/dugong//siteA"; }, "cluster state: standby.source.root must be an absolute path"},
      {[&](auto& j) { source(j)["root"] = "/dugong/../siteA"; }, "cluster state: standby.source.root must be an absolute path"},
      {[&](auto& j) { source(j)["root"] = "/"; }, "cluster state: standby.source.root must be an absolute path"},
      {[&](auto& j) { source(j)["restore"] = "siteA"; },
       "cluster state: standby.source.restore must be an object like {\"stanza\": \"siteA\", \"options\": {...}}"},
      {[&](auto& j) { source(j)["restore"].erase("stanza"); },
       "cluster state: standby.source.restore.stanza must be a string"},
      {[&](auto& j) { source(j)["restore"]["options"] = {{"repo1-retention-full", 2}}; },
       "cluster state: standby.source.restore.options.repo1-retention-full must be a string"},
      {[&](auto& j) { source(j)["restore"]["options"] = "repo1-path=/srv"; },
       "cluster state: standby.source.restore.options must be an object of strings"},
      {[&](auto& j) { source(j)["restore"]["path"] = "/srv"; },
       "cluster state: standby.source.restore: path is not a field of a repository"},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", nlohmann::json::array()}}; },
       "cluster state: standby.source.hosts must name at least one host"},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", "h1:5432"}}; },
       "cluster state: standby.source.hosts must be an array of \"host:port\""},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"h1:5432", 5432}}}; },
       "cluster state: standby.source.hosts[1] must be a string"},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"h1:5432", "h2"}}}; },
       "cluster state: standby.source.hosts[1]: expected \"host:port\", got \"h2\""},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"h 1:5432"}}}; },
       "cluster state: standby.source.hosts[0]: expected \"host:port\", got \"h 1:5432\""},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"[fd00::1:5432"}}}; },
       "cluster state: standby.source.hosts[0]: expected \"host:port\""},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"h1:0"}}}; },
       "cluster state: standby.source.hosts[0]: port 0 is out of range"},
      {[&](auto& j) { source(j) = {{"kind", "hosts"}, {"hosts", {"h1:5432"}}, {"root", "/x"}}; },
       "cluster state: standby.source: root is not a field of a hosts source"},
      {[&](auto& j) { source(j) = {{"kind", "pgbackrest"}}; },
       "cluster state: standby.source.restore is missing: a pgbackrest source is the repository it names"},
      {[&](auto& j) { source(j) = {{"kind", "pgbackrest"}, {"stanza", "siteA"}}; },
       "cluster state: standby.source: stanza is not a field of a pgbackrest source"},
      {[](auto& j) { j["standby"]["demotedAt"] = "0/4FFFF28"; },
       "cluster state: standby.demotedAt must be an object like {\"wal\": \"0/4FFFF28\", \"timeline\": 2}"},
      {[](auto& j) { j["standby"]["demotedAt"].erase("wal"); },
       "cluster state: standby.demotedAt.wal must be a string like 0/4FFFF28"},
      {[](auto& j) { j["standby"]["demotedAt"]["wal"] = "4FFFF28"; }, "cluster state: standby.demotedAt.wal: "},
      {[](auto& j) { j["standby"]["demotedAt"]["timeline"] = 0; },
       "cluster state: standby.demotedAt.timeline must be an integer of at least 1"},
      {[](auto& j) { j["standby"]["demotedAt"].erase("timeline"); },
       "cluster state: standby.demotedAt.timeline must be an integer of at least 1"},
      {[](auto& j) { j["standby"]["demotedAt"]["lsn"] = "0/1"; },
       "cluster state: standby.demotedAt: lsn is not a field of a demotion point"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = standbyState();
    c.mutate(j);
    std::string err = standbyErrorOf(j);
    EXPECT_EQ(err.rfind(c.error, 0), 0u) << "got: \"" << err << "\" want: " << c.error;
  }
  // A demote request needs format 3; its content is the primary's to validate
  // (validateDemote), like a promote request's.
  nlohmann::json j = demoteState();
  j.erase("format");
  EXPECT_EQ(standbyErrorOf(j), "cluster state: the demote field needs format 3");
  j = demoteState();
  j["demote"] = "soon";
  EXPECT_EQ(standbyErrorOf(j), "");
  // The other kinds, and the optional fields, read and written back.
  for (const nlohmann::json& other :
       {nlohmann::json{{"kind", "hosts"}, {"hosts", {"h1:5432", "[::1]:5433", "10.0.0.7:6432"}}},
        nlohmann::json{{"kind", "pgbackrest"}, {"restore", {{"stanza", "siteA"}, {"options", nlohmann::json::object()}}}},
        nlohmann::json{{"kind", "dugong"},
                       {"cluster", "siteA"},
                       {"zookeeper", "a1:2181"},
                       {"chroot", "/dugong-zk"},
                       {"root", "/dugong/siteA"}}}) {
    j = standbyState();
    j["standby"] = {{"source", other}};
    auto s = ClusterState::fromJson(j, ClusterState::Formats::kSyncAndStandby);
    ASSERT_TRUE(s.ok()) << s.error();
    EXPECT_EQ(s->toJson()["standby"], j["standby"]);
  }
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
