// What every dugong-adm command shares: the common options, exit codes, and the
// operator's name in history records. Reading and changing the cluster is ops/cluster.h.
#pragma once

#include <optional>
#include <string>

#include "ops/cluster.h"
#include "statemachine/result.h"
#include "zk/client.h"
#include "zk/options.h"

namespace dugong::adm {

// Exit codes (also in the man page).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,       // the operation failed, or verify found a problem
  kExitUsage = 2,        // bad arguments; nothing was changed
  kExitUnavailable = 3,  // ZooKeeper unreachable, or no such cluster
};

struct CommonOptions {
  std::string zk;       // -z/--zk, $DUGONG_ZK: "host:port[,host:port...][/chroot]"
  std::string cluster;  // -c/--cluster, $DUGONG_CLUSTER
  std::string root;     // --root: default /dugong/<cluster>
  bool json = false;    // --json: machine-readable output
  int timeoutSeconds = 10;  // --timeout: bound of each ZooKeeper call and of connecting
  // --zk-auth-file, $DUGONG_ZK_AUTH_FILE: a file holding "user:password", the digest
  // credentials the agents use (zookeeper.auth); needed to change a cluster whose
  // nodes have ACLs. Never given on the command line itself (argv is public).
  std::string zkAuthFile;
  // --config, $DUGONG_CONFIG: a dugong.yaml (tools/adm/config_file.h) for what the
  // options above leave unset.
  std::string configFile;
  // Credentials from the configuration file (zookeeper.auth), when --zk-auth-file is not given.
  std::optional<zk::DigestAuth> auth;
};

// Prints "dugong-adm: <message>" on stderr and returns `code`.
int fail(int code, const std::string& message);

// The ZooKeeper options the common options name (a "/chroot" suffix of the connect
// string is split off; credentials read from --zk-auth-file). Errors when neither --zk
// nor $DUGONG_ZK, or neither --cluster nor --root, is given, or the credentials file is
// unreadable or not "user:password".
Result<zk::ZkOptions> zkOptionsFrom(const CommonOptions& o);

// whyActive (cluster_view.h) of the peer `id`, its agent asked now (2 s); "its agent may
// run" and why when the cluster's view cannot be read.
std::string whyActiveNow(zk::Client& client, const CommonOptions& common, const std::string& id);

// The operator's name for history records: "dugong-adm <command> by <user>@<host>".
std::string operatorReason(const std::string& what);

}  // namespace dugong::adm
