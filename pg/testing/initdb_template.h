// The bin directory that the tests' postgres servers and agents run postgres' programs
// from: one initdb per ctest run instead of one per test case that makes a new system, and
// no fsync by the programs that write a whole data directory. The agent under test
// bootstraps a new cluster by running `<postgres.binDir>/initdb` (pg/controller_programs.cc);
// an initdb took 3 to 12 s of a case on the shared 2-core machine, most of it fsync.
//
// With DUGONG_CLUSTER_FIXTURES=FIXTURES (set for every cluster test and postgres adapter
// test by its CMake stanza), the cluster harness gives its agents, and PgTestCluster its
// nodes, a bin directory of its own under FIXTURES/initdb: every program of the real one
// (symbolic links), but
// - `initdb` (Initdb::kFromTemplate) is a script that runs the real initdb once per argument
//   list (and initdb version) into a template, then copies the template into the data
//   directory it is asked for. Everything else the agent does around it (its marker, the
//   arguments, the start, the roles and passwords) runs as in production, and the standbys
//   are still made by the agent's pg_basebackup. The clusters of one run share their
//   database system identifier (a test that needs two systems asks for the real initdb:
//   HarnessOptions::realInitdb, PgTestCluster::addNode's System::kOwn, Initdb::kReal);
//   each has its own ZooKeeper chroot and directories.
// - `pg_basebackup`, and `initdb` with Initdb::kReal, run the real program with the same
//   arguments and `--no-sync`: it does not fsync the files it wrote. The adapter's command
//   line and the copy are those of production; only the flush to the disk is left out, which
//   only a crash of the host (never done by a test) would show. The servers run with
//   fsync=off for the same reason (PgTestCluster::addNode), and pg_rewind already runs
//   with --no-sync (the adapter syncs the file system itself). Record 0088.
// Without the variable (a test binary run by hand) the real programs run.
#pragma once

#include <string>

namespace dugong::pg::testing {

enum class Initdb {
  kFromTemplate,  // a copy of the run's template: the clusters share one system identifier
  kReal,          // a system of its own
};

// The bin directory for the tests' postgres (made once per run and kind under
// FIXTURES/initdb), or `realBinDir` when the variable is not set. Throws
// std::runtime_error when it cannot be made.
std::string testBinDir(const std::string& realBinDir, Initdb initdb);

}  // namespace dugong::pg::testing
