// The dugong agent's configuration: one YAML file, validated once at start.
//
//   cluster: demo                       # required
//   zookeeper:
//     connect: 127.0.0.1:2181           # required
//     chroot: ""                        # optional
//     root: ""                          # default /dugong/<cluster>
//     sessionTimeoutMs: 10000
//     tickTimeMs: 0                     # the ensemble's tickTime (an upper bound); 0: assume
//                                       # half the session timeout (the primary's lease)
//     leaseIntervalMs: 0                # leader round trips; 0: T/10 within [50, 1000]
//     lease: true                       # false: no lease (comparisons only)
//     failsafe: on                      # quorum loss: the primary writes on under its sync's
//                                       # promise (POST /failsafe; docs/design.md "Quorum loss:
//                                       # the sync's promise"); needs the lease and http.listen
//                                       # reachable by the other agents; off: stop at the lease
//     auth: {user: dugong, password: s3cret}   # digest auth + ACLs (warned when absent);
//                                       # or passwordFile: /etc/dugong/zk.pw instead of password
//     sessionFile: ""                   # default <dataDir>.dugong-session: the session kept
//                                       # across an agent restart (agent/session_file.h)
//   peer:
//     id: ""                            # default <ip>:<postgres port>
//     ip: 127.0.0.1                     # required: where others reach this postgres
//     zoneId: ""                        # default: the host name
//   postgres:                           # the pg adapter (pg/options.h)
//     dataDir: /var/lib/dugong/data     # required
//     port: 5432
//     listenAddress: 127.0.0.1
//     binDir: /usr/lib/postgresql/15/bin
//     osUser: postgres
//     superuser: postgres
//     superuserPassword: ""             # or superuserPasswordFile: a file holding it
//     replicationUser: dugong_repl
//     replicationPassword: ""           # required (or replicationPasswordFile), unless
//                                       # allowTrust with a loopback replicationCidr
//     replicationCidr: 0.0.0.0/0
//     allowTrust: false                 # trust over TCP on loopback (demos; warned at start)
//     socketDir: ""                     # default <dataDir>.socket
//     maxSlotWalKeepSize: 16GB          # WAL a replication slot may keep; -1: unbounded
//     hba: []                           # extra pg_hba.conf lines
//     settings: {}                      # extra postgresql.conf settings
//     useRewind: true
//     healthIntervalMs: 1000
//     queryTimeoutMs: 5000
//     startTimeoutSeconds: 120
//     stopTimeoutSeconds: 60
//     basebackupTimeoutSeconds: 3600    # a rebuild's pg_basebackup (raise for large databases)
//     rewindTimeoutSeconds: 1800        # a rebuild's pg_rewind
//     repairStandbyAfterSeconds: 60     # a standby that cannot follow its upstream this
//                                       # long is repaired (pg_rewind, else pg_basebackup)
//     tls:                              # TLS (pg/tls.h); default: none on the server, prefer
//       certFile: ""                    # postgres' certificate and key (PEM): ssl = on
//       keyFile: ""                     # (0600, readable by osUser)
//       caFile: ""                      # ssl_ca_file: CA of client certificates
//       hostsslOnly: false              # pg_hba's TCP lines are hostssl: TLS or nothing
//       sslmode: prefer                 # of every TCP connection dugong makes (replication,
//                                       # pg_basebackup, pg_rewind, queries, dugong-adm):
//                                       # disable ... verify-full
//       rootCertFile: ""                # sslrootcert (default caFile): needed by verify-*
//       clientCertFile: ""              # sslcert/sslkey, when the server asks for one
//       clientKeyFile: ""
//   http:
//     listen: 127.0.0.1:8008            # the status server (the default); "": none
//     certFile: ""                      # HTTPS: PEM certificate chain (with keyFile); "": HTTP
//     keyFile: ""                       # its private key
//     caFile: ""                        # CAs trusted when reading other agents over HTTPS
//                                       # (POST /switchover), besides the system's
//     auth:
//       tokenFile: ""                   # the credential of POST /switchover (bearer token or
//                                       # basic-auth password); or token: inline. None: disabled
//     peerKeyFile: ""                   # the cluster's key (the same file on every host, 0600):
//                                       # authenticates the failsafe's messages between agents
//                                       # (agent/failsafe_message.h); required for the failsafe
//                                       # when this agent is reachable from other hosts
//   tags:
//     noloadbalance: false              # replica endpoints answer 503 (out of read pools)
//     nofailover: false                 # never made the sync, so never takes over
//   singleton: false                    # one-node-write mode
//   switchover:
//     handoverWaitMs: 5000              # promote of the sync: the primary stops first and
//                                       # the sync waits this long for its last WAL; 0: off
//   sync:
//     replaceAfterMs: 2000              # commits wait this long on a sync that does not move:
//                                       # the primary replaces it by an async; 0: never
//     replaceHoldMs: 5000               # no second such replacement within this long (doubling
//                                       # while they keep coming, up to 64 times)
//     connectGraceMs: 10000             # a sync's time without streaming before it counts
//   replication:                        # docs/decisions/0079-quorum-commit.md; absent: no
//                                       # wish (set the cluster's with dugong-adm config set)
//     mode: sync                        # sync: Manatee's one sync; quorum: commits wait for
//                                       # any k of a set of `size` standbys (ANY k (...)); the
//                                       # cluster configuration's replication block wins
//     k: 1                              # quorum mode: 1 <= k < size
//     size: 2                           # quorum mode: 2 to 64
//   rejoin: rewind                      # a deposed ex-primary: rewind (pg_rewind a diverged
//                                       # one, or follow as it is), follow (only as it is),
//                                       # manual (dugong-adm rebuild)
//   health:
//     withdrawAfterSeconds: 30          # postgres unhealthy this long: leave ZooKeeper
//   shutdown:
//     stopPostgres: false               # on SIGTERM, also stop postgres
//   hooks:
//     onRoleChange: ""                  # an executable run after each role change; empty: none
//     onStart: ""                       # run once the agent has started (HTTP up, joining)
//     onStop: ""                        # run when it stops on SIGTERM, after leaving; waited for
//     timeoutSeconds: 30                # a hook still running then is killed
//   clusterConfig:
//     allowUnsafe: []                   # what the cluster configuration (dugong-adm config) may
//                                       # set on this host although it runs commands, loads
//                                       # code or breaks a guarantee (pg/cluster_config_guard.h):
//                                       # setting names, hba-trust, hba-superuser
//   log:
//     level: info                       # trace, debug, info, warn, error
//     format: text                      # text or json
//
// Unknown keys are errors, so that a typo never silently means a default.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/peer_key.h"
#include "statemachine/rejoin_policy.h"
#include "driver/defaults.h"
#include "pg/options.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "statemachine/standby.h"
#include "zk/options.h"

namespace dugong::agent {

struct AgentConfig {
  std::string path;  // the file it was read from
  zk::ZkOptions zk;
  // Where the agent keeps its ZooKeeper session across a restart; beside it, the
  // instance lock `<sessionFile>.lock`. Default `<postgres.dataDir>.dugong-session`.
  std::string sessionFile;
  std::string instanceLockPath() const { return sessionFile + ".lock"; }
  // Names the watchdog of the agent's last run (agent/process_stamp.h).
  std::string watchdogRecordPath() const { return sessionFile + ".watchdog"; }
  // The record of the failsafe promises this peer gave (agent/promise_record.h).
  std::string promiseRecordPath() const { return sessionFile + ".promise"; }
  PeerIdentity identity;
  pg::PgOptions pg;
  std::string httpHost;  // empty: no HTTP server (http.listen: "")
  int httpPort = 0;
  std::string httpCertFile;  // with httpKeyFile: HTTPS; empty: plain HTTP
  std::string httpKeyFile;
  std::string httpCaFile;  // trusted when reading agents over HTTPS; "": the system's CAs
  std::optional<std::string> httpSecret;  // the mutating endpoints' credential; none: disabled
  std::optional<PeerKey> peerKey;         // http.peerKeyFile's; none: messages to peers go unauthenticated
  bool singleton = false;
  // standby.source (docs/decisions/0083-standby-cluster.md 2.4, 4.1): a cluster with no
  // state is set up as a standby cluster of this source. "hosts://h1:5432,h2:5432",
  // "dugong://zk1:2181,zk2:2181/dugong/siteA" or "pgbackrest://sitea"; standby.restore
  // {stanza, options} its repository (options as backup.* takes them; the stanza is a
  // pgbackrest:// source's own, required for the others). Ignored once a state exists.
  std::optional<StandbySource> standbySource;
  // The driver's defaults (driver/defaults.h).
  RejoinPolicy rejoin = driver::defaults::kRejoin;
  int handoverWaitMs = driver::defaults::kHandoverWaitMs;
  int syncReplaceAfterMs = driver::defaults::kSyncReplaceAfterMs;
  int syncReplaceHoldMs = driver::defaults::kSyncReplaceHoldMs;
  int syncConnectGraceMs = driver::defaults::kSyncConnectGraceMs;
  // replication (0079, 0089): this host's wish for the mode, k and set size, which the
  // agent, as its cluster's primary, moves the state to when the cluster configuration has
  // no replication block (ReplicationWanted). Unset: no wish. Every agent reads every
  // format of the state whatever this says.
  std::optional<ReplicationWanted> replication;
  // The ensemble's tickTime as the operator states it (an upper bound), for the primary's
  // lease (driver/lease.h); 0: half the negotiated session timeout, ZooKeeper's floor.
  int zkTickTimeMs = 0;
  // The failsafe (driver/failsafe.h): on by default.
  bool zkFailsafe = true;
  int withdrawAfterSeconds = 30;
  bool stopPostgresOnExit = false;
  std::string onRoleChangeHook;  // empty: none
  std::string onStartHook;       // empty: none
  std::string onStopHook;        // empty: none
  int hookTimeoutSeconds = 30;
  // clusterConfig.allowUnsafe: what this host lets the cluster configuration set
  // although it is unsafe (pg/cluster_config_guard.h); by default nothing.
  std::set<std::string> clusterConfigAllowUnsafe;
  std::string logLevel = "info";
  std::string logFormat = "text";
  // What is allowed but unsafe (trust, no ZooKeeper ACLs, password files others can
  // read): the agent logs each at every start, and `dugong --check` prints them.
  std::vector<std::string> warnings;
};

// Reads and validates the file. Errors name the file and the key: "dugong.yaml:
// postgres.port: expected an integer from 1 to 65535, found \"abc\"".
Result<AgentConfig> loadConfig(const std::string& path);
// The same from YAML text (`path` only names it in errors).
Result<AgentConfig> parseConfig(const std::string& yamlText, const std::string& path);

}  // namespace dugong::agent
