// One initdb per ctest run instead of one per test case that makes a new system. The agent under test
// bootstraps a new cluster by running `<postgres.binDir>/initdb` (pg/controller_programs.cc);
// an initdb took 3 to 12 s of a case on the shared 2-core machine, most of it fsync.
//
// With DUGONG_CLUSTER_FIXTURES=FIXTURES (set for every cluster test and postgres adapter
// test by its CMake stanza), the cluster harness gives its agents, and PgTestCluster its
// nodes, a bin directory of its own: every program of the real one
// (symbolic links), but `initdb` is a script that runs the real initdb once per argument
// list (and initdb version) into a template under FIXTURES/initdb, then copies the template into the
// data directory it is asked for. Everything else the agent does around it (its marker,
// the arguments, the start, the roles and passwords) runs as in production, and the
// standbys are still made by the agent's pg_basebackup. The clusters of one run share
// their database system identifier (a test that needs two systems asks for the real
// initdb: HarnessOptions::realInitdb, PgTestCluster::addNode's `ownSystem`); each has its
// own ZooKeeper chroot and directories. Without the variable (a test binary run by hand)
// the real initdb runs.
#pragma once

#include <string>

namespace dugong::pg::testing {

// The bin directory for the agents (made once per run under FIXTURES/initdb), or
// `realBinDir` when the variable is not set. Throws std::runtime_error when it cannot be
// made.
std::string binDirWithInitdbFromTemplate(const std::string& realBinDir);

}  // namespace dugong::pg::testing
