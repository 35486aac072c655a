// What every dugong-adm command shares: the common options, exit codes, the
// connection to ZooKeeper, reading the cluster (state, active peers, agent statuses)
// and the bounded test-and-set update of the state.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "statemachine/cluster_state.h"
#include "statemachine/result.h"
#include "tools/adm/cluster_view.h"
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

// Connects within the timeout. The error says which servers could not be reached.
Result<std::unique_ptr<zk::Client>> connectZk(const zk::ZkOptions& options, std::chrono::milliseconds timeout);

struct StateRead {
  ClusterState state;
  int32_t version = -1;
};
// Reads and validates the state. A missing state node is an error naming the path
// ("no cluster at /dugong/x: ..."), as is an invalid state.
Result<StateRead> readClusterState(zk::Client& client);

// The cluster as ZooKeeper and (with `agents`) the peers' agents see it now. Agents are
// asked in parallel, each bounded by `agentTimeout`.
Result<ClusterView> fetchView(zk::Client& client, const std::string& cluster, bool agents,
                              std::chrono::milliseconds agentTimeout = std::chrono::seconds(3));

// whyActive (cluster_view.h) of the peer `id`, its agent asked now (2 s); "its agent may
// run" and why when the cluster's view cannot be read.
std::string whyActiveNow(zk::Client& client, const CommonOptions& common, const std::string& id);

// Wall-clock now, in ms since the epoch.
EpochMs nowMs();

// A bounded test-and-set update. Each attempt re-reads the state and calls `change` on
// a copy: an error refuses (nothing is written), false means there is nothing to do,
// true writes the copy with the version read. A lost race re-reads and tries again, up
// to `attempts` times. A write whose outcome is unknown (connection lost) is resolved by
// re-reading: if the state now equals the one written, it counts as written.
struct UpdateResult {
  bool written = false;  // false: `change` said there was nothing to do
  ClusterState state;    // the state now in ZooKeeper (as written, or as read)
  int32_t version = -1;
  int attempts = 0;
};
Result<UpdateResult> updateState(zk::Client& client, const std::function<Result<bool>(ClusterState&)>& change,
                                 const std::string& reason, int attempts = 5);

// The operator's name for history records: "dugong-adm <command> by <user>@<host>".
std::string operatorReason(const std::string& what);

}  // namespace dugong::adm
