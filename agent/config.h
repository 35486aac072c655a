// The dugong agent's configuration: one YAML file, validated once at start.
//
//   cluster: demo                       # required
//   zookeeper:
//     connect: 127.0.0.1:2181           # required
//     chroot: ""                        # optional
//     root: ""                          # default /dugong/<cluster>
//     sessionTimeoutMs: 10000
//     auth: {user: dugong, password: s3cret}   # optional digest auth + ACLs
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
//     superuserPassword: ""             # optional
//     replicationUser: dugong_repl
//     replicationPassword: ""           # optional
//     replicationCidr: 0.0.0.0/0
//     hba: []                           # extra pg_hba.conf lines
//     settings: {}                      # extra postgresql.conf settings
//     useRewind: true
//     healthIntervalMs: 1000
//     queryTimeoutMs: 5000
//     startTimeoutSeconds: 120
//     stopTimeoutSeconds: 60
//   http:
//     listen: 127.0.0.1:8008            # the status server; empty: none
//   singleton: false                    # one-node-write mode
//   health:
//     withdrawAfterSeconds: 30          # postgres unhealthy this long: leave ZooKeeper
//   shutdown:
//     stopPostgres: false               # on SIGTERM, also stop postgres
//   log:
//     level: info                       # trace, debug, info, warn, error
//     format: text                      # text or json
//
// Unknown keys are errors, so that a typo never silently means a default.
#pragma once

#include <string>

#include "pg/options.h"
#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "zk/options.h"

namespace dugong::agent {

struct AgentConfig {
  std::string path;  // the file it was read from
  zk::ZkOptions zk;
  PeerIdentity identity;
  pg::PgOptions pg;
  std::string httpHost;  // empty: no HTTP server
  int httpPort = 0;
  bool singleton = false;
  int withdrawAfterSeconds = 30;
  bool stopPostgresOnExit = false;
  std::string logLevel = "info";
  std::string logFormat = "text";
};

// Reads and validates the file. Errors name the file and the key: "dugong.yaml:
// postgres.port: expected an integer from 1 to 65535, found \"abc\"".
Result<AgentConfig> loadConfig(const std::string& path);
// The same from YAML text (`path` only names it in errors).
Result<AgentConfig> parseConfig(const std::string& yamlText, const std::string& path);

}  // namespace dugong::agent
