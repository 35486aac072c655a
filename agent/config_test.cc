#include "agent/config.h"

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  // A valid file, with extra lines for the zookeeper and postgres sections; its agent and
  // postgres are reachable from other hosts, so it names a peer key (the failsafe needs
  // one then).
  std::string valid(const std::string& zk = "", const std::string& pg = "  replicationPassword: r3pl\n") const {
    return "cluster: c1\nzookeeper:\n  connect: 127.0.0.1:2181\n" + zk + "peer:\n  ip: 10.0.0.7\npostgres:\n  dataDir: " +
           dir_.path() + "/data\n  port: 6543\n  listenAddress: 10.0.0.7\n" + pg +
           "http:\n  listen: 0.0.0.0:8008\n  peerKeyFile: " + peerKey_ + "\n";
  }
  std::string writeFile(const std::string& name, const std::string& text, mode_t mode) const {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string errorOf(const std::string& yaml) const {
    auto c = parseConfig(yaml, "d.yaml");
    return c.ok() ? "" : c.error();
  }
  dugong::testing::ScratchDir dir_{"dugong-config"};
  const std::string peerKey_ = writeFile("peer.key", std::string(64, 'k') + "\n", 0600);
};

TEST_F(ConfigTest, ValidConfigGetsSensibleDefaults) {
  auto c = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->identity.id, "10.0.0.7:6543");
  EXPECT_EQ(c->identity.pgUrl, "tcp://postgres@10.0.0.7:6543/postgres");
  EXPECT_EQ(*c->identity.backupUrl, "http://10.0.0.7:8008");
  EXPECT_FALSE(c->identity.zoneId.empty());
  EXPECT_EQ(c->pg.peerId, c->identity.id);
  EXPECT_EQ(c->zk.effectiveRoot(), "/dugong/c1");
  EXPECT_EQ(c->zk.sessionTimeoutMs, 10000);
  EXPECT_EQ(c->httpPort, 8008);
  EXPECT_FALSE(c->singleton);
  EXPECT_FALSE(c->stopPostgresOnExit);
  EXPECT_EQ(c->onRoleChangeHook, "");
  EXPECT_EQ(c->hookTimeoutSeconds, 30);
  EXPECT_EQ(c->logFormat, "text");
  EXPECT_EQ(c->rejoin, RejoinPolicy::kRewind);
  EXPECT_EQ(c->handoverWaitMs, 5000);
  EXPECT_EQ(c->syncReplaceAfterMs, 2000);
  EXPECT_EQ(c->syncReplaceHoldMs, 5000);
  EXPECT_EQ(c->syncConnectGraceMs, 10000);
}

TEST_F(ConfigTest, SessionFileAndRebuildTimeouts) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_EQ(byDefault->sessionFile, dir_.path() + "/data.dugong-session");
  EXPECT_EQ(byDefault->instanceLockPath(), dir_.path() + "/data.dugong-session.lock");
  EXPECT_EQ(byDefault->pg.basebackupTimeout, std::chrono::seconds(3600));
  EXPECT_EQ(byDefault->pg.rewindTimeout, std::chrono::seconds(1800));
  auto set = parseConfig(valid("  sessionFile: /run/dugong/session\n",
                               "  replicationPassword: r3pl\n  basebackupTimeoutSeconds: 86400\n"
                               "  rewindTimeoutSeconds: 7200\n"),
                         "d.yaml");
  ASSERT_TRUE(set.ok()) << set.error();
  EXPECT_EQ(set->sessionFile, "/run/dugong/session");
  EXPECT_EQ(set->pg.basebackupTimeout, std::chrono::seconds(86400));
  EXPECT_EQ(set->pg.rewindTimeout, std::chrono::seconds(7200));
  EXPECT_NE(errorOf(valid("  sessionFile: relative/path\n")).find("zookeeper.sessionFile"), std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  basebackupTimeoutSeconds: 5\n"))
                .find("basebackupTimeoutSeconds"),
            std::string::npos);
}

TEST_F(ConfigTest, StatusServerListensOnLoopbackUnlessTurnedOff) {
  const std::string withoutHttp = valid().substr(0, valid().find("http:"));
  auto byDefault = parseConfig(withoutHttp, "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_EQ(byDefault->httpHost, "127.0.0.1");
  EXPECT_EQ(byDefault->httpPort, 8008);
  auto off = parseConfig(withoutHttp + "http:\n  listen: \"\"\n", "d.yaml");
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_EQ(off->httpHost, "");
  EXPECT_FALSE(off->identity.backupUrl.has_value());
}

// The review's minimal production file (operator review P21): the peer advertises
// 10.0.0.5 while postgres (postgres.listenAddress) and the HTTP API (http.listen) keep
// their loopback defaults, so no other peer can stream from it or reach its agent. Valid,
// with a warning for each (printed by --check and logged at start).
TEST_F(ConfigTest, AnAdvertisedAddressNothingListensOnIsWarnedAbout) {
  const std::string repl = writeFile("repl.pw", "r3pl\n", 0600);
  const std::string minimal = "cluster: c1\nzookeeper:\n  connect: 10.0.0.1:2181\npeer:\n  ip: 10.0.0.5\n"
                              "postgres:\n  dataDir: " + dir_.path() + "/data\n  replicationPasswordFile: " + repl +
                              "\n";
  auto warnings = [&](const std::string& yaml) {
    auto c = parseConfig(yaml, "d.yaml");
    EXPECT_TRUE(c.ok()) << c.error();
    std::string all;
    for (const auto& w : c.ok() ? c->warnings : std::vector<std::string>()) all += w + "\n";
    return all;
  };
  const std::string both = warnings(minimal);
  EXPECT_NE(both.find("postgres listens on 127.0.0.1 only (postgres.listenAddress) while this peer advertises "
                      "10.0.0.5 (peer.ip): the other peers cannot stream from it nor take over from it; set "
                      "postgres.listenAddress to 10.0.0.5 (or '*')"),
            std::string::npos)
      << both;
  EXPECT_NE(both.find("the HTTP API listens on 127.0.0.1:8008 only (http.listen) while this peer advertises 10.0.0.5 "
                      "(peer.ip): the other peers' agents, which call http://127.0.0.1:8008, reach their own host "
                      "instead of this one; set http.listen to 10.0.0.5:8008 (or 0.0.0.0:8008)"),
            std::string::npos)
      << both;
  // Listening where the peer is advertised: neither warning.
  const std::string reachable =
      warnings(minimal + "  listenAddress: \"*\"\nhttp:\n  listen: 10.0.0.5:8008\n  peerKeyFile: " + peerKey_ + "\n");
  EXPECT_EQ(reachable.find("listens on"), std::string::npos) << reachable;
  EXPECT_EQ(warnings(minimal + "  listenAddress: 10.0.0.5,127.0.0.1\nhttp:\n  listen: \"\"\n").find("listens on"),
            std::string::npos);
  // A peer advertised on loopback (the demo, one host): nothing to warn about.
  std::string demo = minimal;
  demo.replace(demo.find("10.0.0.5"), 8, "127.0.0.1");
  EXPECT_EQ(warnings(demo).find("listens on"), std::string::npos) << warnings(demo);
}

TEST_F(ConfigTest, TheFailsafeIsOnUnlessTurnedOff) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_TRUE(byDefault->zkFailsafe);
  auto off = parseConfig(valid("  failsafe: off\n"), "d.yaml");
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_FALSE(off->zkFailsafe);
  auto on = parseConfig(valid("  failsafe: on\n"), "d.yaml");
  ASSERT_TRUE(on.ok()) << on.error();
  EXPECT_TRUE(on->zkFailsafe);
  EXPECT_NE(errorOf(valid("  failsafe: sometimes\n")).find("zookeeper.failsafe"), std::string::npos);
}

TEST_F(ConfigTest, EveryKeyIsRead) {
  auto c = parseConfig(valid() +
                           "singleton: true\nhealth:\n  withdrawAfterSeconds: 9\nshutdown:\n  stopPostgres: yes\n"
                           "hooks:\n  onRoleChange: /usr/local/bin/role-changed\n  onStart: /usr/local/bin/started\n"
                           "  onStop: /usr/local/bin/stopped\n  timeoutSeconds: 5\n"
                           "log:\n  level: debug\n  format: json\nrejoin: follow\n"
                           "switchover:\n  handoverWaitMs: 0\n"
                           "sync:\n  replaceAfterMs: 1500\n  replaceHoldMs: 60000\n  connectGraceMs: 5000\n",
                       "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->singleton);
  EXPECT_EQ(c->withdrawAfterSeconds, 9);
  EXPECT_TRUE(c->stopPostgresOnExit);
  EXPECT_EQ(c->onRoleChangeHook, "/usr/local/bin/role-changed");
  EXPECT_EQ(c->onStartHook, "/usr/local/bin/started");
  EXPECT_EQ(c->onStopHook, "/usr/local/bin/stopped");
  EXPECT_EQ(c->hookTimeoutSeconds, 5);
  EXPECT_EQ(c->logLevel, "debug");
  EXPECT_EQ(c->logFormat, "json");
  EXPECT_EQ(c->rejoin, RejoinPolicy::kFollow);
  EXPECT_EQ(c->handoverWaitMs, 0);
  EXPECT_EQ(c->syncReplaceAfterMs, 1500);
  EXPECT_EQ(c->syncReplaceHoldMs, 60000);
  EXPECT_EQ(c->syncConnectGraceMs, 5000);
}

// replication (docs/decisions/0079-quorum-commit.md, 0089): no wish by default (the
// cluster configuration's, else the state's mode is kept); sync, or quorum with k and size
// (1 <= k < size); anything else refused with the key named.
TEST_F(ConfigTest, ReplicationModeQuorumWithKAndSize) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_FALSE(byDefault->replication.has_value());
  auto sync = parseConfig(valid() + "replication:\n  mode: sync\n", "d.yaml");
  ASSERT_TRUE(sync.ok()) << sync.error();
  ASSERT_TRUE(sync->replication.has_value());
  EXPECT_EQ(sync->replication->mode, ReplicationMode::kSync);
  auto quorum = parseConfig(valid() + "replication:\n  mode: quorum\n  k: 2\n  size: 4\n", "d.yaml");
  ASSERT_TRUE(quorum.ok()) << quorum.error();
  ASSERT_TRUE(quorum->replication.has_value());
  EXPECT_EQ(quorum->replication->mode, ReplicationMode::kQuorum);
  EXPECT_EQ(quorum->replication->k, 2);
  EXPECT_EQ(quorum->replication->size, 4);
  auto defaults = parseConfig(valid() + "replication:\n  mode: quorum\n", "d.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.error();
  EXPECT_EQ(defaults->replication->k, 1);
  EXPECT_EQ(defaults->replication->size, 2);

  EXPECT_EQ(errorOf(valid() + "replication:\n  mode: quorum\n  k: 2\n  size: 2\n"),
            "d.yaml: replication: k (2) must be below size (2): with k = size every member's failure stalls writes");
  EXPECT_EQ(errorOf(valid() + "replication:\n  mode: raft\n"),
            "d.yaml: replication.mode: expected sync or quorum, found \"raft\"");
  EXPECT_NE(errorOf(valid() + "replication:\n  mode: quorum\n  k: 0\n").find("replication.k: expected an integer from 1"),
            std::string::npos);
  EXPECT_NE(errorOf(valid() + "replication:\n  mode: quorum\n  size: 1\n").find("replication.size: expected an integer from 2"),
            std::string::npos);
  EXPECT_EQ(errorOf(valid() + "singleton: true\nreplication:\n  mode: quorum\n"),
            "d.yaml: replication.mode: quorum: a one-node-write (singleton) peer has no standby");
  EXPECT_NE(errorOf(valid() + "replication:\n  quorum: 1\n").find("replication.quorum: unknown key"), std::string::npos);
}

TEST_F(ConfigTest, ErrorsNameTheFileAndTheKey) {
  struct Case {
    std::string yaml, error;
  };
  const std::string v = valid();
  std::vector<Case> cases = {
      {"", "d.yaml: the file is empty"},
      {"cluster: [", "d.yaml: not valid YAML"},
      {"- a\n- b\n", "top level: expected a mapping"},
      {v + "colour: blue\n", "d.yaml: colour: unknown key"},
      {v + "log:\n  lvl: debug\n", "log.lvl: unknown key"},
      {v.substr(v.find('\n') + 1), "cluster: is required"},
      {"cluster: a/b\n" + v.substr(v.find('\n') + 1), "cluster: must be a non-empty name without '/'"},
      {v + "singleton: maybe\n", "singleton: expected true or false, found \"maybe\""},
      {v + "log:\n  level: loud\n", "log.level: expected trace, debug, info, warn or error"},
      {v + "log:\n  format: xml\n", "log.format: expected text or json"},
      {valid("  sessionTimeoutMs: 5\n"), "zookeeper.sessionTimeoutMs: expected an integer from 1000"},
      {valid("  auth:\n    user: u\n"), "zookeeper.auth: needs both user and password"},
      {valid("", "  settings: [a]\n"), "postgres.settings: expected a mapping"},
      {valid("", "  port: 6544\n"), "postgres.port: appears twice"},
      {v + "zookeeper:\n  connect: other:2181\n", "zookeeper: appears twice"},
      {v + "health:\n  withdrawAfterSeconds: x\n", "health.withdrawAfterSeconds: expected an integer"},
      {v + "hooks:\n  onRoleChange: notify.sh\n", "hooks.onRoleChange: expected an absolute path"},
      {v + "hooks:\n  timeoutSeconds: 0\n", "hooks.timeoutSeconds: expected an integer"},
      {v + "hooks:\n  onStart: started.sh\n", "hooks.onStart: expected an absolute path"},
      {v + "hooks:\n  onStop: ./stopped\n", "hooks.onStop: expected an absolute path"},
      {v + "hooks:\n  onStopped: /bin/true\n", "hooks.onStopped: unknown key"},
      {v + "sync:\n  replaceAfterMs: 100\n", "sync: replaceAfterMs: at least 500 (or 0: never)"},
      {v + "sync:\n  replaceAfter: 100\n", "sync.replaceAfter: unknown key"},
      {v + "rejoin: always\n", "d.yaml: rejoin: expected follow, rewind or manual, found \"always\""},
  };
  for (const auto& c : cases) {
    std::string err = errorOf(c.yaml);
    EXPECT_NE(err.find(c.error), std::string::npos) << "got \"" << err << "\"\nwant \"" << c.error << "\"";
  }
  // Duplicated sections in YAML are errors of the parser or of the schema, never ignored.
  EXPECT_NE(errorOf("cluster: c\nzookeeper:\n  connect: x:1\npeer:\n  ip: 1.2.3.4\npostgres:\n  dataDir: "
                    "/nonexistent/dir/data\n"),
            "");
}

TEST_F(ConfigTest, PortAndListenAreChecked) {
  std::string v = valid();
  std::string badPort = v;
  badPort.replace(badPort.find("port: 6543"), 10, "port: 70000");
  EXPECT_NE(errorOf(badPort).find("postgres.port: expected an integer from 1 to 65535, found \"70000\""),
            std::string::npos);
  std::string badListen = v;
  badListen.replace(badListen.find("0.0.0.0:8008"), 12, "localhost");
  EXPECT_NE(errorOf(badListen).find("http.listen: expected host:port"), std::string::npos);
}

TEST_F(ConfigTest, ReplicationBeyondLoopbackNeedsAPassword) {
  EXPECT_NE(errorOf(valid("", "")).find("d.yaml: postgres: replicationCidr 0.0.0.0/0 reaches beyond loopback, and "
                                         "replicationPassword (or replicationPasswordFile) is not set"),
            std::string::npos)
      << errorOf(valid("", ""));
  EXPECT_NE(errorOf(valid("", "  replicationCidr: 10.1.0.0/16\n  allowTrust: true\n")).find("reaches beyond loopback"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationCidr: 127.0.0.1/32\n")).find("or set allowTrust: true"), std::string::npos);
  auto trusted = parseConfig(valid("", "  replicationCidr: 127.0.0.1/32\n  allowTrust: true\n"), "d.yaml");
  ASSERT_TRUE(trusted.ok()) << trusted.error();
  ASSERT_GE(trusted->warnings.size(), 1u);
  EXPECT_NE(trusted->warnings[0].find("postgres.allowTrust is on: postgres trusts the superuser postgres on loopback "
                                      "and replication from 127.0.0.1/32 over TCP"),
            std::string::npos)
      << trusted->warnings[0];
}

TEST_F(ConfigTest, PasswordsFromFilesAndWarnings) {
  std::string repl = writeFile("repl.pw", "from file\n", 0600);
  std::string super = writeFile("super.pw", "super secret", 0644);
  std::string zkpw = writeFile("zk.pw", "zk\n", 0600);
  auto c = parseConfig(valid("  auth:\n    user: dugong\n    passwordFile: " + zkpw + "\n",
                             "  replicationPasswordFile: " + repl + "\n  superuserPasswordFile: " + super + "\n"),
                       "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->pg.replicationPassword, std::optional<std::string>("from file"));
  EXPECT_EQ(c->pg.superuserPassword, std::optional<std::string>("super secret"));
  ASSERT_TRUE(c->zk.auth.has_value());
  EXPECT_EQ(c->zk.auth->credentials(), "dugong:zk");
  // ZooKeeper has auth, nothing is trusted; the agents talk in clear across hosts.
  ASSERT_EQ(c->warnings.size(), 2u);
  EXPECT_NE(c->warnings[0].find(super + " (superuserPasswordFile) can be read by other users"), std::string::npos);

  // Without ZooKeeper credentials: a warning.
  auto open = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->warnings.size(), 2u);
  EXPECT_NE(open->warnings[0].find("zookeeper.auth is not set"), std::string::npos);
  EXPECT_NE(open->warnings[1].find("talk in clear (http://10.0.0.7:8008) across hosts"), std::string::npos);

  EXPECT_NE(errorOf(valid("", "  replicationPassword: a\n  replicationPasswordFile: " + repl + "\n"))
                .find("postgres.replicationPassword: set either replicationPassword or replicationPasswordFile"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPasswordFile: /nonexistent/pw\n"))
                .find("postgres.replicationPasswordFile: cannot read /nonexistent/pw"),
            std::string::npos);
  std::string empty = writeFile("empty.pw", "\n", 0600);
  EXPECT_NE(errorOf(valid("", "  replicationPasswordFile: " + empty + "\n")).find("must hold the password alone"),
            std::string::npos);
}

// postgres.bootstrap (pg/pgbackrest.h): initdb by default, or a pgBackRest restore with
// its stanza, repository options and recovery target, checked before anything starts.
TEST_F(ConfigTest, PostgresBootstrapFromABackup) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_EQ(byDefault->pg.bootstrapMethod, "initdb");
  const std::string from = "  replicationPassword: r3pl\n  bootstrap:\n    method: pgbackrest\n";
  auto c = parseConfig(valid("", from + "    stanza: main\n    repository:\n      repo1-path: /srv/pgbackrest\n"
                                        "    target: name:before-upgrade\n"),
                       "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->pg.bootstrapMethod, "pgbackrest");
  EXPECT_EQ(c->pg.bootstrapStanza, "main");
  EXPECT_EQ(c->pg.bootstrapRepo.at("repo1-path"), "/srv/pgbackrest");
  EXPECT_EQ(c->pg.bootstrapTarget, "name:before-upgrade");
  EXPECT_NE(errorOf(valid("", from)).find("postgres.bootstrap.stanza is required"), std::string::npos);
  EXPECT_NE(errorOf(valid("", from + "    stanza: main\n    target: xid:5\n")).find("expected name:LABEL"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", from + "    stanza: main\n    repository:\n      repo1-retention-full: 2\n"))
                .find("backup.repo1-retention-full: not a key"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  bootstrap:\n    method: clone\n"))
                .find("initdb or pgbackrest"),
            std::string::npos);
}

// postgres.tls (pg/tls.h): read into the pg options, checked with precise messages.
TEST_F(ConfigTest, PostgresTls) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_EQ(byDefault->pg.tls.sslmode, "prefer");
  EXPECT_FALSE(byDefault->pg.tls.serverTls());
  const std::string crt = writeFile("server.crt", "x", 0644), key = writeFile("server.key", "x", 0600),
                    ca = writeFile("ca.crt", "x", 0644);
  auto c = parseConfig(valid("", "  replicationPassword: r3pl\n  tls:\n    certFile: " + crt + "\n    keyFile: " + key +
                                     "\n    caFile: " + ca + "\n    hostsslOnly: true\n    sslmode: verify-full\n"),
                       "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->pg.tls.certFile, crt);
  EXPECT_EQ(c->pg.tls.keyFile, key);
  EXPECT_EQ(c->pg.tls.rootCert(), ca);
  EXPECT_TRUE(c->pg.tls.hostsslOnly);
  EXPECT_EQ(c->pg.tls.sslmode, "verify-full");
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  tls:\n    sslmode: verify-full\n"))
                .find("d.yaml: postgres: tls.sslmode verify-full verifies the server's certificate"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  tls:\n    sslmode: on\n")).find("is not one of"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  tls:\n    certFile: /nonexistent.crt\n    keyFile: " +
                                  key + "\n"))
                .find("tls.certFile /nonexistent.crt is not a file"),
            std::string::npos);
  EXPECT_NE(errorOf(valid("", "  replicationPassword: r3pl\n  tls:\n    certfile: x\n")).find("postgres.tls.certfile: unknown key"),
            std::string::npos);
}

// The keys etc/dugong.yaml lists (commented ones too), as dotted paths; the children of
// postgres.settings are postgres' names, not ours.
std::set<std::string> sampleKeys(const std::string& text) {
  std::set<std::string> keys;
  std::vector<std::pair<size_t, std::string>> parents;  // indentation, key
  const std::regex line(R"(^( *)(?:# ?)?([A-Za-z][A-Za-z0-9]*):( |$))");
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    const size_t indent = m[1].length();
    while (!parents.empty() && parents.back().first >= indent) parents.pop_back();
    std::string path;
    for (const auto& [i, k] : parents) path += k + ".";
    if (path != "postgres.settings.") keys.insert(path + m[2].str());
    parents.emplace_back(indent, m[2].str());
  }
  return keys;
}

// The keys the code reads, from its own error for an unknown key in each section
// ("unknown key (known here: ...)").
std::set<std::string> codeKeys(const std::function<std::string(const std::string& section)>& errorWithBogusIn,
                               const std::string& section) {
  std::set<std::string> keys;
  const std::string error = errorWithBogusIn(section);
  const auto at = error.find("known here: ");
  if (at == std::string::npos) return {"(no key list in: " + error + ")"};
  std::istringstream list(error.substr(at + 12, error.rfind(')') - at - 12));
  for (std::string k; std::getline(list, k, ',');) {
    k.erase(0, k.find_first_not_of(' '));
    keys.insert((section.empty() ? "" : section + ".") + k);
  }
  return keys;
}

TEST_F(ConfigTest, TheSampleListsEveryKeyTheCodeReads) {
  std::ifstream in(DUGONG_SAMPLE_CONFIG);
  std::stringstream text;
  text << in.rdbuf();
  const std::set<std::string> sample = sampleKeys(text.str());
  ASSERT_GT(sample.size(), 40u) << text.str();
  // A valid file with a bogus key in one section: the code's error lists that section's keys.
  auto errorWithBogusIn = [&](const std::string& section) {
    std::string yaml = valid("  auth:\n    user: u\n    password: p\n");
    if (section.empty()) return errorOf(yaml + "bogus: 1\n");
    if (section == "zookeeper.auth") return errorOf(valid("  auth:\n    user: u\n    password: p\n    bogus: 1\n"));
    if (section == "zookeeper") return errorOf(valid("  bogus: 1\n"));
    if (section == "postgres") return errorOf(valid("", "  replicationPassword: r3pl\n  bogus: 1\n"));
    if (section == "postgres.bootstrap") {
      return errorOf(valid("", "  replicationPassword: r3pl\n  bootstrap:\n    bogus: 1\n"));
    }
    if (section == "postgres.tls") return errorOf(valid("", "  replicationPassword: r3pl\n  tls:\n    bogus: 1\n"));
    if (section == "standby.restore") {
      return errorOf(valid() + "standby:\n  source: pgbackrest://sitea\n  restore:\n    bogus: 1\n");
    }
    if (section == "http") return errorOf(valid() + "  bogus: 1\n");
    if (section == "http.auth") return errorOf(valid() + "  auth:\n    bogus: 1\n");
    if (section == "peer") {
      std::string v = valid();
      return errorOf(v.replace(v.find("  ip: 10.0.0.7\n"), 15, "  ip: 10.0.0.7\n  bogus: 1\n"));
    }
    return errorOf(valid() + section + ":\n  bogus: 1\n");
  };
  // Every section the sample has (so that a new one is checked without being named
  // here), and the top level; postgres.settings is free-form.
  std::set<std::string> sections{""};
  for (const auto& k : sample) {
    for (auto dot = k.find('.'); dot != std::string::npos; dot = k.find('.', dot + 1)) sections.insert(k.substr(0, dot));
  }
  sections.erase("postgres.settings");
  ASSERT_TRUE(sections.count("sync"));
  std::set<std::string> code;
  for (const auto& section : sections) {
    for (const auto& k : codeKeys(errorWithBogusIn, section)) code.insert(k);
  }
  for (const auto& k : code) EXPECT_TRUE(sample.count(k)) << "etc/dugong.yaml does not list " << k;
  for (const auto& k : sample) EXPECT_TRUE(code.count(k)) << "etc/dugong.yaml lists " << k << ", which the code does not read";
  // And the man page describes each key (not the sections): docs/dugong.8 names it in a
  // .B or .BR line.
  std::ifstream man(DUGONG_MAN_PAGE);
  ASSERT_TRUE(man) << DUGONG_MAN_PAGE;
  std::set<std::string> described;
  for (std::string line; std::getline(man, line);) {
    if (line.rfind(".B ", 0) != 0 && line.rfind(".BR ", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(' ') + 1));
    for (std::string w; words >> w;) {
      std::erase(w, '"');
      while (!w.empty() && (w.back() == ',' || w.back() == ';')) w.pop_back();
      described.insert(w);
    }
  }
  for (const auto& k : code) {
    if (sections.count(k)) continue;
    EXPECT_TRUE(described.count(k)) << "docs/dugong.8 does not describe " << k;
  }
}

TEST_F(ConfigTest, HttpApiCredentialCertificateAndTags) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_FALSE(byDefault->httpSecret);
  EXPECT_FALSE(byDefault->identity.tags.any());
  const std::string token = writeFile("token", "t0ken\n", 0600);
  const std::string yaml = valid() + "  certFile: /etc/c.pem\n  keyFile: /etc/k.pem\n  auth:\n    tokenFile: " + token +
                           "\ntags:\n  nofailover: true\n  noloadbalance: yes\n";
  auto c = parseConfig(yaml, "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(*c->httpSecret, "t0ken");
  EXPECT_EQ(c->httpCertFile, "/etc/c.pem");
  EXPECT_EQ(c->httpCaFile, "");
  EXPECT_EQ(*c->identity.backupUrl, "https://10.0.0.7:8008");
  EXPECT_TRUE(c->identity.tags.nofailover);
  EXPECT_TRUE(c->identity.tags.noloadbalance);
  EXPECT_TRUE(c->warnings.empty() || c->warnings.back().find("http") == std::string::npos);

  // Readable by others: a warning, as for the password files; over plain HTTP on a
  // non-loopback address: a warning too.
  const std::string open = writeFile("open-token", "t0ken\n", 0644);
  auto warned = parseConfig(valid() + "  auth:\n    tokenFile: " + open + "\n", "d.yaml");
  ASSERT_TRUE(warned.ok()) << warned.error();
  std::string all;
  for (const auto& w : warned->warnings) all += w + "\n";
  EXPECT_NE(all.find("can be read by other users"), std::string::npos) << all;
  EXPECT_NE(all.find("crosses the network in clear text"), std::string::npos) << all;

  EXPECT_EQ(errorOf(valid() + "  certFile: /etc/c.pem\n"), "d.yaml: http: set both certFile and keyFile, or neither");
  EXPECT_EQ(errorOf(valid() + "tags:\n  nofailover: maybe\n"),
            "d.yaml: tags.nofailover: expected true or false, found \"maybe\"");
  EXPECT_NE(errorOf(valid() + "tags:\n  clonefrom: true\n").find("tags.clonefrom: unknown key"), std::string::npos);
}

// The failsafe across hosts only with the cluster's peer key (docs/security.md "Peer
// links"); on loopback alone, or with the failsafe off, none is needed.
TEST_F(ConfigTest, TheFailsafeAcrossHostsNeedsThePeerKey) {
  std::string noKey = valid();
  noKey.erase(noKey.find("  peerKeyFile: "));
  const std::string err = errorOf(noKey);
  EXPECT_NE(err.find("d.yaml: http.peerKeyFile: the failsafe (zookeeper.failsafe) is on and this agent is reachable "
                     "from other hosts (http://10.0.0.7:8008)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("zookeeper.failsafe: off"), std::string::npos) << err;
  EXPECT_EQ(errorOf(valid("  failsafe: off\n").substr(0, valid("  failsafe: off\n").find("  peerKeyFile: "))), "");
  EXPECT_EQ(errorOf(valid("  lease: false\n").substr(0, valid("  lease: false\n").find("  peerKeyFile: "))), "");
  std::string loopback = noKey;
  loopback.replace(loopback.find("0.0.0.0:8008"), 12, "127.0.0.1:8008");
  auto onOneHost = parseConfig(loopback, "d.yaml");
  ASSERT_TRUE(onOneHost.ok()) << onOneHost.error();
  EXPECT_FALSE(onOneHost->peerKey);
  for (const auto& w : onOneHost->warnings) EXPECT_EQ(w.find("in clear"), std::string::npos) << w;

  auto keyed = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(keyed.ok()) << keyed.error();
  ASSERT_TRUE(keyed->peerKey);
  EXPECT_EQ(keyed->peerKey->mac({"x"}), PeerKey(std::string(64, 'k')).mac({"x"}));

  // The key file: only its owner reads it, and it is long enough.
  const std::string open = writeFile("open.key", std::string(64, 'k') + "\n", 0640);
  const std::string shortKey = writeFile("short.key", "0123456789\n", 0600);
  EXPECT_NE(errorOf(noKey + "  peerKeyFile: " + open + "\n").find("can be read by other users than its owner"),
            std::string::npos);
  EXPECT_NE(errorOf(noKey + "  peerKeyFile: " + shortKey + "\n").find("fewer than 32"), std::string::npos);
  EXPECT_NE(errorOf(noKey + "  peerKeyFile: " + dir_.path() + "/none\n").find("cannot read"), std::string::npos);
}

// standby.source (docs/decisions/0083 4.1): the hosts and dugong forms, not on a singleton.
TEST_F(ConfigTest, AStandbySourceNamesPlainPostgresHosts) {
  auto c = parseConfig(valid() + "standby:\n  source: hosts://db1:5432,db2:5433\n", "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_TRUE(c->standbySource.has_value());
  EXPECT_EQ(c->standbySource->describe(), "hosts db1:5432, db2:5433");
  c = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_FALSE(c->standbySource.has_value());
  EXPECT_EQ(errorOf(valid() + "standby:\n  source: db1:5432\n"),
            "d.yaml: standby.source: expected \"hosts://host:port[,host:port...]\", "
            "\"dugong://zkhost:port[,zkhost:port...]/root\" or \"pgbackrest://stanza\", got \"db1:5432\"");
  c = parseConfig(valid() + "standby:\n  source: dugong://a1:2181,a2:2181/dugong/siteA\n", "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_TRUE(c->standbySource.has_value());
  EXPECT_EQ(c->standbySource->describe(), "dugong siteA (a1:2181,a2:2181/dugong/siteA)");
  EXPECT_EQ(errorOf(valid() + "singleton: true\nstandby:\n  source: hosts://db1:5432\n"),
            "d.yaml: standby.source: a one-node-write (singleton) peer cannot be a standby cluster");
}

// A pgBackRest repository as the source, or as a streaming source's `restore`
// (docs/decisions/0083 "Phase 8 as built"): standby.restore's options by backup.*'s
// rules; every refusal names the key.
TEST_F(ConfigTest, AStandbySourceMayBeARepositoryOrHaveOne) {
  auto c = parseConfig(valid() + "standby:\n  source: pgbackrest://sitea\n  restore:\n    options:\n"
                                 "      repo1-path: /srv/pgbackrest\n",
                       "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_TRUE(c->standbySource && c->standbySource->restore);
  EXPECT_EQ(c->standbySource->kind, SourceKind::kPgbackrest);
  EXPECT_EQ(c->standbySource->restore->stanza, "sitea");
  EXPECT_EQ(c->standbySource->restore->options, (std::map<std::string, std::string>{{"repo1-path", "/srv/pgbackrest"}}));
  c = parseConfig(valid() + "standby:\n  source: hosts://db1:5432\n  restore:\n    stanza: sitea\n    options:\n"
                            "      repo1-path: /srv/pgbackrest\n",
                  "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->standbySource->describe(), "hosts db1:5432");
  ASSERT_TRUE(c->standbySource->restore.has_value());
  EXPECT_EQ(c->standbySource->restore->stanza, "sitea");
  c = parseConfig(valid() + "standby:\n  source: pgbackrest://sitea\n", "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->standbySource->restore->options.empty());

  const std::string hosts = valid() + "standby:\n  source: hosts://db1:5432\n";
  const std::string repo = valid() + "standby:\n  source: pgbackrest://sitea\n";
  EXPECT_EQ(errorOf(valid() + "standby:\n  source: pgbackrest://\n"),
            "d.yaml: standby.source: no stanza in expected \"hosts://host:port[,host:port...]\", "
            "\"dugong://zkhost:port[,zkhost:port...]/root\" or \"pgbackrest://stanza\", got \"pgbackrest://\"");
  EXPECT_EQ(errorOf(repo + "  restore:\n    options:\n      repo1-retention-full: 2\n"),
            "d.yaml: standby.restore: backup.repo1-retention-full: not a key of the backup section (archive, stanza, "
            "replica-methods) nor a pgBackRest repository option valid for every command (repo1-path, repo1-type, "
            "..., log-path, log-level-file, lock-path)");
  EXPECT_EQ(errorOf(repo + "  restore:\n    options:\n      archive: on\n"),
            "d.yaml: standby.restore: options.archive: a key of the backup section, not a pgBackRest repository option");
  EXPECT_EQ(errorOf(repo + "  restore:\n    stanza: siteb\n"),
            "d.yaml: standby.restore.stanza: the pgbackrest:// source names stanza sitea, not siteb (leave it out)");
  EXPECT_EQ(errorOf(valid() + "standby:\n  source: pgbackrest://SiteA\n"),
            "d.yaml: standby.restore: backup.stanza: letters, digits and '-' only, got 'SiteA'");
  EXPECT_EQ(errorOf(hosts + "  restore:\n    options:\n      repo1-path: /srv/pgbackrest\n"),
            "d.yaml: standby.restore.stanza: is required with a hosts source");
  EXPECT_EQ(errorOf(hosts + "  restore:\n    stanza: sitea\n    where: x\n"),
            "d.yaml: standby.restore.where: unknown key (known here: options, stanza)");
  EXPECT_EQ(errorOf(valid() + "standby:\n  restore:\n    stanza: sitea\n"),
            "d.yaml: standby.restore: needs standby.source");
}

TEST(Config, MissingFileIsAClearError) {
  auto c = loadConfig("/nonexistent/dugong.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "/nonexistent/dugong.yaml: cannot read the configuration file");
}

// clusterConfig.allowUnsafe (pg/cluster_config_guard.h): nothing by default; a name that
// needs no allowing (a typo) is an error, not a silent no-op.
TEST_F(ConfigTest, ClusterConfigAllowUnsafeNamesWhatItAllows) {
  auto byDefault = parseConfig(valid(), "d.yaml");
  ASSERT_TRUE(byDefault.ok()) << byDefault.error();
  EXPECT_TRUE(byDefault->clusterConfigAllowUnsafe.empty());
  auto c = parseConfig(valid() + "clusterConfig:\n  allowUnsafe: [archive_command, hba-trust]\n", "d.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->clusterConfigAllowUnsafe, (std::set<std::string>{"archive_command", "hba-trust"}));
  const std::string typo = errorOf(valid() + "clusterConfig:\n  allowUnsafe: [archive_comand]\n");
  EXPECT_NE(typo.find("clusterConfig.allowUnsafe"), std::string::npos) << typo;
  EXPECT_NE(typo.find("'archive_comand' is not something"), std::string::npos) << typo;
  EXPECT_NE(errorOf(valid() + "clusterConfig:\n  allow: [fsync]\n").find("unknown key"), std::string::npos);
}

}  // namespace
}  // namespace dugong::agent
