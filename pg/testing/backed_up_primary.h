// A test's pgBackRest repository and a primary archiving into it, shared by the adapter
// tests of the replica methods and of a standby cluster's repository source, and by the
// end-to-end test of a standby cluster fed by a repository.
#pragma once

#include <map>
#include <string>

#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg::testing {

// The pgBackRest options of the repository PgTestCluster::makePgBackRestDirs made under
// the cluster's directory: repo1-path, log-path and lock-path.
std::map<std::string, std::string> repositoryOptions(const PgTestCluster& cluster);

// Starts `controller`'s node as a first primary whose cluster configuration's backup
// section is the repository's options, archive on, stanza `stanza` and `extra` (keys of
// the backup section, e.g. replica-methods). An empty string, or what failed.
std::string startArchivingPrimary(const PgTestCluster& cluster, PgController& controller, const std::string& stanza,
                                  const std::map<std::string, std::string>& extra = {});

// Creates `stanza` in the repository for `primary` (if it is not there) and takes a full
// backup of it. An empty string, or what failed.
std::string takeFullBackup(const PgTestCluster& cluster, const PgTestNode& primary, const std::string& stanza);

}  // namespace dugong::pg::testing
