// An unplanned failover watched through HAProxy's read-write port, shared by the
// end-to-end test and the benchmark.
//
// A client writes one row every 100 ms through the write port, each on a new
// connection, and records which postgres answered. T0 is just before SIGKILL of the
// primary's agent (and, if asked, its postmaster); T1 is the first write acknowledged
// through HAProxy by another peer. While it runs, the cluster state in ZooKeeper is
// read after every write: once the old primary is listed as deposed, any connection
// that HAProxy still hands to it is a violation.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tests/e2e/cluster_harness.h"
#include "tests/ecosystem/haproxy_process.h"

namespace dugong::ecosystem {

struct FailoverThroughHaproxy {
  bool ok = false;          // a new primary took writes through HAProxy and the old one was deposed
  std::string error;
  double seconds = 0;       // T1 - T0
  int oldPort = 0;          // the deposed primary's postgres port
  int newPort = 0;          // the postgres port that acknowledged the first write after T0
  int writes = 0;           // acknowledged writes through HAProxy
  std::vector<std::string> violations;  // connections handed to the deposed peer
};

// REQUIRES: `primary` is the harness's writable primary; HAProxy fronts every peer.
FailoverThroughHaproxy failOverThroughHaproxy(e2e::Harness& h, int primary, const HaproxyProcess& haproxy,
                                              bool killPostgresToo, std::chrono::milliseconds timeout);

// Writes through the write port every 100 ms for `duration`; returns the violations
// (a connection handed to `forbiddenPort`) and counts acknowledged writes in `writes`.
std::vector<std::string> writeThroughHaproxy(const HaproxyProcess& haproxy, int forbiddenPort,
                                             std::chrono::milliseconds duration, int* writes);

// The HAProxy servers for every peer of the harness.
std::vector<HaproxyServer> haproxyServers(e2e::Harness& h);

}  // namespace dugong::ecosystem
