#include "pg/managed_conf.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

PgOptions someOptions() {
  PgOptions o;
  o.dataDir = "/tmp/x/data";
  o.port = 6543;
  o.peerId = "peer-a";
  o.replicationPassword = "r";
  o.settings = {{"shared_buffers", "16MB"}, {"wal_keep_size", "1GB"}};
  return o;
}

// The file's header says where its settings come from: this host's postgres.settings
// and the cluster's configuration, changed with `dugong-adm config` (as pg_hba.conf's
// header does; operator review P10).
TEST(ManagedConf, TheHeaderNamesBothPlacesItsSettingsComeFrom) {
  const std::string text = renderManagedConf(someOptions(), ManagedState{});
  const std::string header = text.substr(0, text.find("# dugong-state: "));
  EXPECT_EQ(header,
            "# Managed by dugong: rewritten at every role change. Do not edit; use postgres.settings in dugong.yaml "
            "or\n# the cluster configuration (dugong-adm config) instead.\n");
}

TEST(ManagedConf, PrimaryNamesItsSyncAndRecordsItsState) {
  ManagedState s;
  s.role = "primary";
  s.syncId = "peer-b";
  s.readOnly = true;
  std::string text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("synchronous_standby_names = '\"peer-b\"'"), std::string::npos) << text;
  EXPECT_NE(text.find("default_transaction_read_only = on"), std::string::npos);
  EXPECT_NE(text.find("primary_conninfo = ''"), std::string::npos);
  EXPECT_NE(text.find("port = 6543"), std::string::npos);
  EXPECT_NE(text.find("shared_buffers = '16MB'"), std::string::npos);
  // The option overrides the default, which is not written twice.
  EXPECT_NE(text.find("wal_keep_size = '1GB'"), std::string::npos);
  EXPECT_EQ(text.find("wal_keep_size = '512MB'"), std::string::npos);
  // A crashed postgres comes back quickly: its data directory is made durable with one
  // syncfs(), and its standbys reconnect within 200 ms of it accepting connections.
  EXPECT_NE(text.find("recovery_init_sync_method = syncfs"), std::string::npos) << text;
  EXPECT_NE(text.find("wal_retrieve_retry_interval = '200ms'"), std::string::npos) << text;
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->role, "primary");
  EXPECT_EQ(parsed->syncId, std::optional<std::string>("peer-b"));
  EXPECT_TRUE(parsed->readOnly);
}

// Quorum commit (docs/decisions/0079-quorum-commit.md section 3): the primary's commits
// wait for any k of the members, every name quoted for synchronous_standby_names and the
// whole quoted again as a postgresql.conf string; the state line records k and the
// members, so that a restarted agent knows what the running postgres was told.
TEST(ManagedConf, APrimaryRunsAQuorumAndRecordsIt) {
  ManagedState s;
  s.role = "primary";
  s.syncId = "peer-b";  // what the last apply named: the quorum stands instead
  s.quorum = StandbyQuorum{1, {"peer-b", "Peer \"C\"", "it's"}};
  std::string text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("synchronous_standby_names = 'ANY 1 (\"peer-b\", \"Peer \"\"C\"\"\", \"it''s\")'\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"quorumK\":1,\"quorumMembers\":[\"peer-b\",\"Peer \\\"C\\\"\",\"it's\"]"), std::string::npos)
      << text;
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->quorum, s.quorum);
  EXPECT_EQ(parsed.value(), s);
  // k = 2 of two (a set short of members, transiently).
  s.quorum = StandbyQuorum{2, {"peer-b", "peer-c"}};
  text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("synchronous_standby_names = 'ANY 2 (\"peer-b\", \"peer-c\")'\n"), std::string::npos) << text;
  EXPECT_EQ(parseManagedConf(text)->quorum, s.quorum);
  // Without one, nothing is recorded and the sync is waited for as before.
  s.quorum.reset();
  text = renderManagedConf(someOptions(), s);
  EXPECT_EQ(text.find("quorum"), std::string::npos) << text;
  EXPECT_NE(text.find("synchronous_standby_names = '\"peer-b\"'\n"), std::string::npos) << text;
  EXPECT_EQ(parseManagedConf(text)->quorum, std::nullopt);
  // A standby waits for nobody, whatever it recorded.
  s.role = "sync";
  s.quorum = StandbyQuorum{1, {"peer-b", "peer-c"}};
  text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("synchronous_standby_names = ''\n"), std::string::npos) << text;
}

TEST(ManagedConf, ABadRecordedQuorumIsAnError) {
  const std::string head = "# dugong-state: {\"role\":\"primary\",\"readOnly\":false,";
  EXPECT_EQ(parseManagedConf(head + "\"quorumK\":3,\"quorumMembers\":[\"b\",\"c\"]}\n").error(),
            "dugong.conf: bad quorum: a quorum of 2 members cannot wait for 3");
  EXPECT_FALSE(parseManagedConf(head + "\"quorumK\":1}\n").ok());
  EXPECT_FALSE(parseManagedConf(head + "\"quorumK\":\"1\",\"quorumMembers\":[\"b\"]}\n").ok());
}

TEST(ManagedConf, StoppedWritesSlotsAndSocketAreRendered) {
  ManagedState s;
  s.role = "primary";
  s.syncId = "peer-b";
  s.writesStopped = true;  // read-only whatever readOnly says
  std::string text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("default_transaction_read_only = on"), std::string::npos) << text;
  EXPECT_NE(text.find("unix_socket_directories = '/tmp/x/data.socket'"), std::string::npos) << text;
  EXPECT_NE(text.find("max_slot_wal_keep_size = '16GB'"), std::string::npos) << text;
  EXPECT_NE(text.find("primary_slot_name = ''"), std::string::npos) << text;
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->writesStopped);

  ManagedState standby;
  standby.role = "sync";
  standby.slotName = "dugong_peer_a";
  standby.upstreamUrl = "tcp://postgres@10.0.0.1:5432/postgres";
  standby.wasPrimary = true;
  text = renderManagedConf(someOptions(), standby);
  EXPECT_NE(text.find("primary_slot_name = 'dugong_peer_a'"), std::string::npos) << text;
  parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->slotName, standby.slotName);
  EXPECT_EQ(parsed->upstreamUrl, standby.upstreamUrl);
  EXPECT_TRUE(parsed->wasPrimary);
  EXPECT_FALSE(parsed->writesStopped);
}

TEST(ManagedConf, StandbyStreamsWithEscapedConninfo) {
  ManagedState s;
  s.role = "async";
  s.upstreamId = "peer-b";
  s.primaryConninfo = "host='h' password='it\\'s'";
  std::string text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("primary_conninfo = 'host=''h'' password=''it\\\\''s'''"), std::string::npos) << text;
  EXPECT_NE(text.find("synchronous_standby_names = ''"), std::string::npos);
  EXPECT_NE(text.find("recovery_target_timeline = 'latest'"), std::string::npos);
  // The conninfo (which may hold a password) is not in the recorded state.
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->upstreamId, std::optional<std::string>("peer-b"));
  EXPECT_EQ(parsed->primaryConninfo, "");
}

// A standby fenced for a takeover replays to its WAL's end whatever its settings say
// (pg/plan/fence.h): the managed values come after the host's settings, so they win.
TEST(ManagedConf, AFencedStandbyReplaysUnhindered) {
  PgOptions o = someOptions();
  o.settings["recovery_min_apply_delay"] = "1h";
  o.settings["max_standby_streaming_delay"] = "-1";
  ManagedState s;
  s.role = "sync";
  std::string text = renderManagedConf(o, s);
  EXPECT_EQ(text.find("recovery_min_apply_delay = 0"), std::string::npos) << "only once fenced";
  s.replayUnhindered = true;
  text = renderManagedConf(o, s);
  for (const char* line : {"recovery_min_apply_delay = 0\n", "max_standby_streaming_delay = 0\n",
                           "max_standby_archive_delay = 0\n"}) {
    const auto managed = text.find(line);
    ASSERT_NE(managed, std::string::npos) << line << text;
    const std::string name = std::string(line).substr(0, std::string(line).find(' '));
    EXPECT_EQ(text.rfind(name + " ="), managed) << line << ": the last value of a setting wins";
  }
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_TRUE(parsed->replayUnhindered);
  s.role = "primary";
  EXPECT_EQ(renderManagedConf(o, s).find("recovery_min_apply_delay = 0"), std::string::npos) << "a standby's only";
}

// A standby cluster's leader (docs/decisions/0083-standby-cluster.md 3.1): in recovery,
// streaming from its source's hosts (the conninfo, which may hold a password, is not
// recorded; what it follows is), no slot, nothing synchronous, following timeline
// switches (P1). Recorded so that a restarted agent knows what runs.
TEST(ManagedConf, AStandbyLeaderStreamsFromItsSource) {
  ManagedState s;
  s.role = "standby-leader";
  s.primaryConninfo = "host=h1,h2 port=5432,5433 target_session_attrs=primary password=pw";
  s.source = "hosts h1:5432, h2:5433";
  std::string text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("primary_conninfo = 'host=h1,h2 port=5432,5433 target_session_attrs=primary password=pw'\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("primary_slot_name = ''\n"), std::string::npos);
  EXPECT_NE(text.find("synchronous_standby_names = ''\n"), std::string::npos);
  EXPECT_NE(text.find("recovery_target_timeline = 'latest'\n"), std::string::npos);
  auto parsed = parseManagedConf(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->role, "standby-leader");
  EXPECT_EQ(parsed->source, std::optional<std::string>("hosts h1:5432, h2:5433"));
  EXPECT_EQ(parsed->primaryConninfo, "");
  EXPECT_EQ(text.find("pw"), text.rfind("pw")) << "the password only in primary_conninfo";
  // Fenced (the leader replacing its sync reads where its replay ends), as a standby is.
  s.primaryConninfo.clear();
  s.replayUnhindered = true;
  text = renderManagedConf(someOptions(), s);
  EXPECT_NE(text.find("primary_conninfo = ''\n"), std::string::npos);
  EXPECT_NE(text.find("recovery_min_apply_delay = 0\n"), std::string::npos);
}

// A leader of a dugong source records the source peer it streams from (0083 "Phase 7 as
// built"): a restarted agent that has not read the source yet keeps following it.
TEST(ManagedConf, AStandbyLeaderOfADugongSourceRecordsItsSourcePeer) {
  ManagedState s;
  s.role = "standby-leader";
  s.primaryConninfo = "host=10.0.0.2 port=5432 password=pw";
  s.source = "dugong siteA peer a2";
  s.sourceCluster = "siteA";
  s.sourcePeerId = "a2";
  s.sourcePeerUrl = "tcp://postgres@10.0.0.2:5432/postgres";
  auto parsed = parseManagedConf(renderManagedConf(someOptions(), s));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->sourceCluster, std::optional<std::string>("siteA"));
  EXPECT_EQ(parsed->sourcePeerId, std::optional<std::string>("a2"));
  EXPECT_EQ(parsed->sourcePeerUrl, std::optional<std::string>("tcp://postgres@10.0.0.2:5432/postgres"));
  s.sourcePeerId.reset();
  s.sourcePeerUrl.reset();
  parsed = parseManagedConf(renderManagedConf(someOptions(), s));
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_FALSE(parsed->sourcePeerId.has_value()) << "no source peer chosen";
}

TEST(ManagedConf, RejectsForeignFiles) {
  EXPECT_FALSE(parseManagedConf("port = 5432\n").ok());
  EXPECT_FALSE(parseManagedConf("# dugong-state: {not json\n").ok());
  EXPECT_FALSE(parseManagedConf("# dugong-state: {\"role\":\"king\",\"readOnly\":false}\n").ok());
}

TEST(Options, ValidateGivesPreciseErrors) {
  PgOptions o = someOptions();
  o.dataDir = "/tmp/data";
  EXPECT_TRUE(validate(o).ok()) << validate(o).error();
  PgOptions bad = o;
  bad.binDir = "/nonexistent/bin";
  EXPECT_NE(validate(bad).error().find("binDir /nonexistent/bin"), std::string::npos);
  bad = o;
  bad.osUser = "no-such-user-dugong";
  EXPECT_NE(validate(bad).error().find("does not exist"), std::string::npos);
  bad = o;
  bad.osUser = "root";
  EXPECT_NE(validate(bad).error().find("refuses to run as root"), std::string::npos);
  bad = o;
  bad.settings["port"] = "1";
  EXPECT_NE(validate(bad).error().find("managed by dugong"), std::string::npos);
  bad = o;
  bad.peerId = "bad id";
  EXPECT_NE(validate(bad).error().find("peerId"), std::string::npos);
  bad = o;
  bad.dataDir = "relative";
  EXPECT_NE(validate(bad).error().find("absolute"), std::string::npos);
  bad = o;
  bad.port = 0;
  EXPECT_NE(validate(bad).error().find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace dugong::pg
