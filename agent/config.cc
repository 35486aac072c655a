#include "agent/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "agent/secret_file.h"
#include "pg/cluster_config_guard.h"
#include "pg/pgbackrest.h"

namespace dugong::agent {
namespace {

// Reads typed values out of one YAML mapping, remembering the first error and every
// key it was asked about, so that unknown keys can be reported.
class Section {
 public:
  Section(const YAML::Node& node, std::string path, std::string* error)
      : node_(node), path_(std::move(path)), error_(error) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) fail(path_.empty() ? "top level" : path_, "expected a mapping");
  }

  template <class T>
  void get(const std::string& key, T* out, bool required = false) {
    known_.insert(key);
    YAML::Node v = value(key);
    if (!v) {
      if (required) fail(name(key), "is required");
      return;
    }
    read(v, key, out);
  }

  void getInt(const std::string& key, int* out, int min, int max) {
    known_.insert(key);
    YAML::Node v = value(key);
    if (!v) return;
    long long x = 0;
    if (!v.IsScalar() || !parseInt(v.Scalar(), &x) || x < min || x > max) {
      return fail(name(key), "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                                 ", found \"" + (v.IsScalar() ? v.Scalar() : std::string("a collection")) + "\"");
    }
    *out = static_cast<int>(x);
  }

  Section child(const std::string& key) {
    known_.insert(key);
    return Section(value(key), name(key), error_);
  }

  // Call after all get()s: reports keys nobody asked about.
  void rejectUnknown() {
    if (!node_ || !node_.IsMap()) return;
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      std::string key = kv.first.as<std::string>();
      if (!seen.insert(key).second) fail(name(key), "appears twice");
      if (!known_.count(key)) {
        std::string all;
        for (const auto& k : known_) all += (all.empty() ? "" : ", ") + k;
        fail(name(key), "unknown key (known here: " + all + ")");
      }
    }
  }

  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  // The section is in the file, as a mapping.
  bool present() const { return node_ && node_.IsMap(); }

  void fail(const std::string& where, const std::string& what) {
    if (error_->empty()) *error_ = where + ": " + what;
  }

 private:
  YAML::Node value(const std::string& key) const {
    if (!node_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node v = node_[key];
    if (!v || v.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    return v;
  }

  static bool parseInt(const std::string& s, long long* out) {
    if (s.empty()) return false;
    size_t used = 0;
    try {
      *out = std::stoll(s, &used);
    } catch (const std::exception&) {
      return false;
    }
    return used == s.size();
  }

  void read(const YAML::Node& v, const std::string& key, std::string* out) {
    if (!v.IsScalar()) return fail(name(key), "expected a string");
    *out = v.Scalar();
  }
  void read(const YAML::Node& v, const std::string& key, bool* out) {
    const std::string s = v.IsScalar() ? v.Scalar() : "";
    if (s == "true" || s == "yes" || s == "on") {
      *out = true;
    } else if (s == "false" || s == "no" || s == "off") {
      *out = false;
    } else {
      fail(name(key), "expected true or false, found \"" + s + "\"");
    }
  }
  void read(const YAML::Node& v, const std::string& key, std::vector<std::string>* out) {
    if (!v.IsSequence()) return fail(name(key), "expected a list of strings");
    for (const auto& item : v) {
      if (!item.IsScalar()) return fail(name(key), "expected a list of strings");
      out->push_back(item.Scalar());
    }
  }
  void read(const YAML::Node& v, const std::string& key, std::map<std::string, std::string>* out) {
    if (!v.IsMap()) return fail(name(key), "expected a mapping of setting names to values");
    for (const auto& kv : v) {
      if (!kv.second.IsScalar()) return fail(name(key) + "." + kv.first.as<std::string>(), "expected a scalar value");
      (*out)[kv.first.as<std::string>()] = kv.second.Scalar();
    }
  }

  YAML::Node node_;
  std::string path_;
  std::string* error_;
  std::set<std::string> known_;
};

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool splitHostPort(const std::string& s, std::string* host, int* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = s.substr(0, colon);
  try {
    size_t used = 0;
    int p = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || p < 1 || p > 65535) return false;
    *port = p;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// A password from `inline` or from the file `file` (one of them). The file's content is
// the password, without a final line break.
std::optional<std::string> secret(Section& section, const std::string& key, std::vector<std::string>* warnings) {
  std::string inlined, file;
  section.get(key, &inlined);
  section.get(key + "File", &file);
  if (!inlined.empty() && !file.empty()) {
    section.fail(section.name(key), "set either " + key + " or " + key + "File, not both");
    return std::nullopt;
  }
  if (file.empty()) return inlined.empty() ? std::nullopt : std::optional<std::string>(inlined);
  auto read = readSecretFile(file);
  if (!read) {
    section.fail(section.name(key + "File"), read.error());
    return std::nullopt;
  }
  if (read->readableByOthers) {
    warnings->push_back(file + " (" + key + "File) can be read by other users than its owner: chmod 600 it");
  }
  return read->secret;
}

bool isLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// Whether every address of a postgres listen_addresses list ("127.0.0.1,::1") is
// loopback: then no other host reaches it.
bool listensOnLoopbackOnly(const std::string& addresses) {
  std::stringstream in(addresses);
  std::string a;
  bool any = false;
  while (std::getline(in, a, ',')) {
    a.erase(0, a.find_first_not_of(' '));
    a.erase(a.find_last_not_of(' ') + 1);
    if (a.empty()) continue;
    if (!isLoopback(a)) return false;
    any = true;
  }
  return any;
}

// A peer advertised on an address its postgres or its HTTP API does not listen on: the
// other peers could not stream from it, nor reach its agent (operator review P21).
void warnUnreachable(AgentConfig& c) {
  const std::string& ip = c.identity.ip;
  if (isLoopback(ip)) return;
  if (listensOnLoopbackOnly(c.pg.listenAddress)) {
    c.warnings.push_back("postgres listens on " + c.pg.listenAddress + " only (postgres.listenAddress) while this "
                         "peer advertises " + ip + " (peer.ip): the other peers cannot stream from it nor take over "
                         "from it; set postgres.listenAddress to " + ip + " (or '*')");
  }
  if (!c.httpHost.empty() && isLoopback(c.httpHost)) {
    const std::string listen = c.httpHost + ":" + std::to_string(c.httpPort);
    c.warnings.push_back("the HTTP API listens on " + listen + " only (http.listen) while this peer advertises " + ip +
                         " (peer.ip): the other peers' agents, which call " + c.identity.backupUrl.value_or(listen) +
                         ", reach their own host instead of this one; set http.listen to " + ip + ":" +
                         std::to_string(c.httpPort) + " (or 0.0.0.0:" + std::to_string(c.httpPort) + ")");
  }
}

// The failsafe across hosts only with its messages authenticated; and a warning when
// agents talk in clear across hosts (docs/security.md "Peer links").
Result<bool> checkPeerLinks(AgentConfig& c) {
  if (!c.identity.backupUrl) return true;
  const std::string url = *c.identity.backupUrl;
  const std::string host = url.substr(url.find("://") + 3, url.rfind(':') - url.find("://") - 3);
  if (isLoopback(host)) return true;
  if (c.zkFailsafe && c.zk.lease && !c.peerKey) {
    return Error{"http.peerKeyFile: the failsafe (zookeeper.failsafe) is on and this agent is reachable from other "
                 "hosts (" + url + "), but its messages would go unauthenticated: a forged answer could keep a "
                 "primary writing after its sync took over. Make a key once (openssl rand -hex 32 > peer.key), copy "
                 "the same file to every host of the cluster (mode 0600) and name it in http.peerKeyFile, or set "
                 "zookeeper.failsafe: off"};
  }
  if (c.httpCertFile.empty()) {
    c.warnings.push_back(std::string(c.httpSecret ? "http.auth is set but http.certFile is not: the token crosses "
                                                    "the network in clear text, and the"
                                                  : "the") +
                         " agents talk in clear (" + url + ") across hosts: what they say can be read on the "
                         "network (set http.certFile and http.keyFile for HTTPS, and http.caFile)");
  }
  return true;
}

}  // namespace

Result<AgentConfig> parseConfig(const std::string& yamlText, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    return Error{path + ": not valid YAML: " + e.what()};
  }
  AgentConfig c;
  c.path = path;
  std::string err;
  Section top(root, "", &err);
  if (!root || root.IsNull()) return Error{path + ": the file is empty"};

  std::string cluster;
  top.get("cluster", &cluster, true);
  c.zk.cluster = cluster;

  Section zk = top.child("zookeeper");
  zk.get("connect", &c.zk.connectString, true);
  zk.get("chroot", &c.zk.chroot);
  zk.get("root", &c.zk.root);
  zk.getInt("sessionTimeoutMs", &c.zk.sessionTimeoutMs, 1000, 600000);
  zk.getInt("tickTimeMs", &c.zkTickTimeMs, 0, 600000);
  zk.getInt("leaseIntervalMs", &c.zk.leaseIntervalMs, 0, 60000);
  zk.get("lease", &c.zk.lease);
  zk.get("failsafe", &c.zkFailsafe);
  zk.get("sessionFile", &c.sessionFile);
  {
    Section auth = zk.child("auth");
    std::string user;
    auth.get("user", &user);
    std::optional<std::string> password = secret(auth, "password", &c.warnings);
    auth.rejectUnknown();
    if (!user.empty() || password) {
      if (user.empty() || !password) auth.fail("zookeeper.auth", "needs both user and password (or passwordFile)");
      c.zk.auth = zk::DigestAuth{user, password.value_or("")};
    }
  }
  zk.rejectUnknown();

  Section peer = top.child("peer");
  peer.get("id", &c.identity.id);
  peer.get("ip", &c.identity.ip, true);
  peer.get("zoneId", &c.identity.zoneId);
  peer.rejectUnknown();

  Section pg = top.child("postgres");
  pg.get("dataDir", &c.pg.dataDir, true);
  pg.get("logFile", &c.pg.logFile);
  pg.getInt("port", &c.pg.port, 1, 65535);
  pg.get("listenAddress", &c.pg.listenAddress);
  pg.get("binDir", &c.pg.binDir);
  pg.get("osUser", &c.pg.osUser);
  pg.get("superuser", &c.pg.superuser);
  c.pg.superuserPassword = secret(pg, "superuserPassword", &c.warnings);
  pg.get("replicationUser", &c.pg.replicationUser);
  c.pg.replicationPassword = secret(pg, "replicationPassword", &c.warnings);
  pg.get("replicationCidr", &c.pg.replicationCidr);
  pg.get("allowTrust", &c.pg.allowTrust);
  pg.get("socketDir", &c.pg.socketDir);
  pg.get("maxSlotWalKeepSize", &c.pg.maxSlotWalKeepSize);
  pg.get("hba", &c.pg.extraHbaLines);
  pg.get("settings", &c.pg.settings);
  pg.get("useRewind", &c.pg.useRewind);
  int ms = static_cast<int>(c.pg.healthInterval.count());
  pg.getInt("healthIntervalMs", &ms, 100, 600000);
  c.pg.healthInterval = std::chrono::milliseconds(ms);
  ms = static_cast<int>(c.pg.queryTimeout.count());
  pg.getInt("queryTimeoutMs", &ms, 100, 600000);
  c.pg.queryTimeout = std::chrono::milliseconds(ms);
  int secs = static_cast<int>(c.pg.startTimeout.count());
  pg.getInt("startTimeoutSeconds", &secs, 1, 86400);
  c.pg.startTimeout = std::chrono::seconds(secs);
  secs = static_cast<int>(c.pg.repairStandbyAfter.count());
  pg.getInt("repairStandbyAfterSeconds", &secs, 1, 86400);
  c.pg.repairStandbyAfter = std::chrono::seconds(secs);
  secs = static_cast<int>(c.pg.dropInactiveSlotAfter.count());
  pg.getInt("dropInactiveSlotAfterSeconds", &secs, 0, 86400 * 7);
  c.pg.dropInactiveSlotAfter = std::chrono::seconds(secs);
  secs = static_cast<int>(c.pg.stopTimeout.count());
  pg.getInt("stopTimeoutSeconds", &secs, 1, 86400);
  c.pg.stopTimeout = std::chrono::seconds(secs);
  secs = static_cast<int>(c.pg.basebackupTimeout.count());
  pg.getInt("basebackupTimeoutSeconds", &secs, 60, 7 * 86400);
  c.pg.basebackupTimeout = std::chrono::seconds(secs);
  secs = static_cast<int>(c.pg.rewindTimeout.count());
  pg.getInt("rewindTimeoutSeconds", &secs, 60, 7 * 86400);
  c.pg.rewindTimeout = std::chrono::seconds(secs);
  // postgres.tls (pg/tls.h): postgres' certificate, hostssl-only pg_hba, and the TLS of
  // every TCP connection dugong makes to a postgres.
  Section tls = pg.child("tls");
  tls.get("certFile", &c.pg.tls.certFile);
  tls.get("keyFile", &c.pg.tls.keyFile);
  tls.get("caFile", &c.pg.tls.caFile);
  tls.get("hostsslOnly", &c.pg.tls.hostsslOnly);
  tls.get("sslmode", &c.pg.tls.sslmode);
  tls.get("rootCertFile", &c.pg.tls.rootCertFile);
  tls.get("clientCertFile", &c.pg.tls.clientCertFile);
  tls.get("clientKeyFile", &c.pg.tls.clientKeyFile);
  tls.rejectUnknown();
  // postgres.bootstrap (pg/pgbackrest.h): a new cluster's first primary restores a
  // pgBackRest backup instead of initdb.
  Section bootstrap = pg.child("bootstrap");
  bootstrap.get("method", &c.pg.bootstrapMethod);
  bootstrap.get("stanza", &c.pg.bootstrapStanza);
  bootstrap.get("repository", &c.pg.bootstrapRepo);
  bootstrap.get("target", &c.pg.bootstrapTarget);
  bootstrap.rejectUnknown();
  if (c.pg.bootstrapMethod == "pgbackrest") {
    auto ok = pg::validateBootstrap({c.pg.bootstrapStanza, c.pg.bootstrapRepo, c.pg.bootstrapTarget});
    if (!ok) bootstrap.fail("postgres.bootstrap", ok.error());
  } else if (c.pg.bootstrapMethod != "initdb") {
    bootstrap.fail("postgres.bootstrap.method", "initdb or pgbackrest, found \"" + c.pg.bootstrapMethod + "\"");
  }
  pg.rejectUnknown();

  // ---- the HTTP API and the peer's tags (agent/http_api.h) ----
  Section http = top.child("http");
  // The status server runs unless the key says "" (HAProxy, Prometheus and dugong-adm
  // need it); loopback by default, so that nothing is exposed unless configured.
  std::string listen = "127.0.0.1:8008";
  http.get("listen", &listen);
  http.get("certFile", &c.httpCertFile);
  http.get("keyFile", &c.httpKeyFile);
  http.get("caFile", &c.httpCaFile);
  std::string peerKeyFile;
  http.get("peerKeyFile", &peerKeyFile);
  if (!peerKeyFile.empty()) {
    if (auto key = readPeerKeyFile(peerKeyFile)) {
      c.peerKey = PeerKey(*key);
    } else {
      http.fail("http.peerKeyFile", key.error());
    }
  }
  {
    Section auth = http.child("auth");
    c.httpSecret = secret(auth, "token", &c.warnings);
    auth.rejectUnknown();
  }
  http.rejectUnknown();
  if (!listen.empty() && !splitHostPort(listen, &c.httpHost, &c.httpPort)) {
    http.fail("http.listen", "expected host:port, like 127.0.0.1:8008, found \"" + listen + "\"");
  }
  if (c.httpCertFile.empty() != c.httpKeyFile.empty()) http.fail("http", "set both certFile and keyFile, or neither");
  Section tags = top.child("tags");
  tags.get("noloadbalance", &c.identity.tags.noloadbalance);
  tags.get("nofailover", &c.identity.tags.nofailover);
  tags.rejectUnknown();
  // ---- end of the HTTP API and tags ----

  top.get("singleton", &c.singleton);
  Section standby = top.child("standby");
  std::string standbySource;
  standby.get("source", &standbySource);
  // standby.restore (0083 2.1, "Phase 8 as built"): the source's pgBackRest repository,
  // its options as backup.* takes them; the stanza is a pgbackrest:// source's own.
  Section restore = standby.child("restore");
  std::string restoreStanza;
  std::map<std::string, std::string> restoreOptions;
  restore.get("stanza", &restoreStanza);
  restore.get("options", &restoreOptions);
  restore.rejectUnknown();
  standby.rejectUnknown();
  if (!standbySource.empty()) {
    if (auto source = parseSourceUrl(standbySource)) {
      c.standbySource = std::move(source).value();
    } else {
      standby.fail("standby.source", source.error());
    }
    if (c.singleton) standby.fail("standby.source", "a one-node-write (singleton) peer cannot be a standby cluster");
  }
  if (restore.present()) {
    if (!c.standbySource) {
      if (standbySource.empty()) standby.fail("standby.restore", "needs standby.source");
    } else if (c.standbySource->kind == SourceKind::kPgbackrest) {
      if (!restoreStanza.empty() && restoreStanza != c.standbySource->restore->stanza) {
        standby.fail("standby.restore.stanza", "the pgbackrest:// source names stanza " +
                                                   c.standbySource->restore->stanza + ", not " + restoreStanza +
                                                   " (leave it out)");
      }
      c.standbySource->restore->options = restoreOptions;
    } else if (restoreStanza.empty()) {
      standby.fail("standby.restore.stanza", "is required with a " +
                                                 std::string(sourceKindName(c.standbySource->kind)) + " source");
    } else {
      c.standbySource->restore = SourceRepository{restoreStanza, restoreOptions};
    }
  }
  if (c.standbySource && c.standbySource->restore) {
    if (auto valid = pg::validateSourceRepository(*c.standbySource->restore); !valid) {
      standby.fail("standby.restore", valid.error());
    }
  }
  Section switchover = top.child("switchover");
  switchover.getInt("handoverWaitMs", &c.handoverWaitMs, 0, 600000);
  switchover.rejectUnknown();
  Section sync = top.child("sync");
  sync.getInt("replaceAfterMs", &c.syncReplaceAfterMs, 0, 600000);
  sync.getInt("replaceHoldMs", &c.syncReplaceHoldMs, 0, 86400000);
  sync.getInt("connectGraceMs", &c.syncConnectGraceMs, 0, 600000);
  sync.rejectUnknown();
  if (c.syncReplaceAfterMs > 0 && c.syncReplaceAfterMs < 500) {
    sync.fail("sync", "replaceAfterMs: at least 500 (or 0: never); a shorter bound replaces a sync that is merely busy");
  }
  // ---- replication (docs/decisions/0079-quorum-commit.md) ----
  // Absent: no wish of this host's (the cluster configuration's, else the state's mode).
  if (Section replication = top.child("replication"); replication.present()) {
    std::string mode = "sync";
    ReplicationWanted wanted{ReplicationMode::kQuorum, 1, 2};
    replication.get("mode", &mode);
    replication.getInt("k", &wanted.k, 1, 64);
    replication.getInt("size", &wanted.size, 2, 64);
    replication.rejectUnknown();
    if (wanted.k >= wanted.size) {
      replication.fail("replication", "k (" + std::to_string(wanted.k) + ") must be below size (" +
                                          std::to_string(wanted.size) +
                                          "): with k = size every member's failure stalls writes");
    }
    if (mode == "quorum") {
      c.replication = wanted;
      if (c.singleton) replication.fail("replication.mode", "quorum: a one-node-write (singleton) peer has no standby");
    } else if (mode == "sync") {
      c.replication = ReplicationWanted{};
    } else {
      replication.fail("replication.mode", "expected sync or quorum, found \"" + mode + "\"");
    }
  }
  // ---- end of replication ----
  std::string rejoin = rejoinPolicyName(c.rejoin);
  top.get("rejoin", &rejoin);
  Section health = top.child("health");
  health.getInt("withdrawAfterSeconds", &c.withdrawAfterSeconds, 1, 86400);
  health.rejectUnknown();
  Section shutdown = top.child("shutdown");
  shutdown.get("stopPostgres", &c.stopPostgresOnExit);
  shutdown.rejectUnknown();
  Section hooks = top.child("hooks");
  hooks.get("onRoleChange", &c.onRoleChangeHook);
  hooks.get("onStart", &c.onStartHook);
  hooks.get("onStop", &c.onStopHook);
  hooks.getInt("timeoutSeconds", &c.hookTimeoutSeconds, 1, 3600);
  hooks.rejectUnknown();
  for (const auto& [key, hook] : {std::pair<const char*, const std::string*>{"hooks.onRoleChange", &c.onRoleChangeHook},
                                  {"hooks.onStart", &c.onStartHook},
                                  {"hooks.onStop", &c.onStopHook}}) {
    if (!hook->empty() && hook->front() != '/') {
      hooks.fail(key, "expected an absolute path, found \"" + *hook + "\"");
    }
  }
  Section clusterConfig = top.child("clusterConfig");
  std::vector<std::string> allowUnsafe;
  clusterConfig.get("allowUnsafe", &allowUnsafe);
  clusterConfig.rejectUnknown();
  if (auto allowed = pg::parseAllowList(allowUnsafe)) {
    c.clusterConfigAllowUnsafe = std::move(allowed).value();
  } else {
    clusterConfig.fail("clusterConfig.allowUnsafe", allowed.error());
  }
  Section log = top.child("log");
  log.get("level", &c.logLevel);
  log.get("format", &c.logFormat);
  log.rejectUnknown();
  top.rejectUnknown();
  if (!err.empty()) return Error{path + ": " + err};

  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(c.logLevel)) {
    return Error{path + ": log.level: expected trace, debug, info, warn or error, found \"" + c.logLevel + "\""};
  }
  if (c.logFormat != "text" && c.logFormat != "json") {
    return Error{path + ": log.format: expected text or json, found \"" + c.logFormat + "\""};
  }
  if (auto policy = parseRejoinPolicy(rejoin)) {
    c.rejoin = *policy;
  } else {
    return Error{path + ": rejoin: expected follow, rewind or manual, found \"" + rejoin + "\""};
  }
  if (cluster.empty() || cluster.find('/') != std::string::npos) {
    return Error{path + ": cluster: must be a non-empty name without '/'"};
  }

  // The identity others see.
  if (c.identity.id.empty()) c.identity.id = c.identity.ip + ":" + std::to_string(c.pg.port);
  if (c.identity.zoneId.empty()) c.identity.zoneId = hostName();
  c.identity.pgUrl =
      "tcp://" + c.pg.superuser + "@" + c.identity.ip + ":" + std::to_string(c.pg.port) + "/postgres";
  if (!c.httpHost.empty()) {
    const std::string host = c.httpHost == "0.0.0.0" ? c.identity.ip : c.httpHost;
    c.identity.backupUrl = (c.httpCertFile.empty() ? "http://" : "https://") + host + ":" + std::to_string(c.httpPort);
  }
  c.pg.peerId = c.identity.id;
  if (c.sessionFile.empty()) c.sessionFile = c.pg.dataDir + ".dugong-session";
  if (c.sessionFile.front() != '/') {
    return Error{path + ": zookeeper.sessionFile: expected an absolute path, found \"" + c.sessionFile + "\""};
  }

  if (auto ok = c.zk.validate(); !ok) return Error{path + ": zookeeper: " + ok.error()};
  if (auto ok = pg::validate(c.pg); !ok) return Error{path + ": postgres: " + ok.error()};
  if (c.pg.allowTrust) {
    std::vector<std::string> trusted;
    if (!c.pg.superuserPassword) trusted.push_back("the superuser " + c.pg.superuser + " on loopback");
    if (!c.pg.replicationPassword) trusted.push_back("replication from " + c.pg.replicationCidr);
    std::string what;
    for (const auto& t : trusted) what += (what.empty() ? "" : " and ") + t;
    c.warnings.push_back(what.empty() ? "postgres.allowTrust is on, but unused: every role has a password"
                                      : "postgres.allowTrust is on: postgres trusts " + what +
                                            " over TCP, without a password; for demos and tests only");
  }
  if (!c.zk.auth) {
    c.warnings.push_back("zookeeper.auth is not set: the cluster's nodes in ZooKeeper are writable by anyone who "
                         "reaches the ensemble (set user and password or passwordFile: ACLs are then on)");
  }
  if (auto ok = checkPeerLinks(c); !ok) return Error{path + ": " + ok.error()};
  warnUnreachable(c);
  return c;
}

Result<AgentConfig> loadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot read the configuration file"};
  std::stringstream buf;
  buf << in.rdbuf();
  return parseConfig(buf.str(), path);
}

}  // namespace dugong::agent
