// What the cluster configuration may not do to a host unless that host's own dugong.yaml
// allows it by name (clusterConfig.allowUnsafe, agent/config.h). Whoever can write the
// ZooKeeper node <root>/config is not necessarily whoever is root on the hosts: a
// setting that runs a command or loads code as postgres, one that writes files outside
// postgres' own, a value that breaks a guarantee dugong gives (an acknowledged commit is
// on the sync, every standby can take over, a rejoin finds the WAL it needs), and a
// pg_hba line that admits without a secret or admits the superuser from beyond loopback
// are each refused, by `dugong-adm config set` and by every agent that applies the
// stored configuration (docs/security.md "The cluster configuration"). Pure: no I/O.
//
// dugong's own archive_command (backup.archive, pg/pgbackrest.h) is not a cluster
// setting: it is built by each agent from its host's options and never checked here.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "pg/cluster_config.h"
#include "statemachine/result.h"

namespace dugong::pg {

// The allow-list names of the two kinds of pg_hba lines refused.
inline constexpr const char* kAllowHbaTrust = "hba-trust";          // trust or ident beyond loopback
inline constexpr const char* kAllowHbaSuperuser = "hba-superuser";  // the superuser named, beyond loopback

// What one host says about the cluster configuration.
struct HostAllowance {
  std::set<std::string> allowUnsafe;  // names from unsafeNames()
  std::string superuser = "postgres";  // postgres.superuser: a line naming it is superuser access
};

// One refused part of a configuration: `name` is what the host would list to allow it
// (a setting's name, hba-trust or hba-superuser).
struct UnsafePart {
  std::string name;
  std::string what;  // "archive_command = 'x'", or the hba line
  std::string why;   // in plain words
};

// Every name an allow list may hold, sorted.
std::vector<std::string> unsafeNames();

// Checks an allow list (clusterConfig.allowUnsafe): each entry must be one of
// unsafeNames(), so that a typo never leaves a host believing it allowed something.
Result<std::set<std::string>> parseAllowList(const std::vector<std::string>& names);

// The parts of `config` that are unsafe, whatever any host allows, in the order of the
// settings' names, then of the hba lines.
std::vector<UnsafePart> unsafeParts(const ClusterConfig& config, const std::string& superuser);

// An error naming each unsafe part `host` does not allow, why it is refused and how to
// allow it; true when there is none.
Result<bool> checkAllowed(const ClusterConfig& config, const HostAllowance& host);

}  // namespace dugong::pg
