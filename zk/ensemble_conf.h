// What the ensemble's configuration allows the primary's lease: the
// four-letter word `conf` (on the client port; ZooKeeper's 4lw.commands.whitelist must
// list it), asked of the servers of a connect string in turn until one answers.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace dugong::zk {

struct EnsembleConf {
  std::string server;  // host:port that answered
  int tickTimeMs = 0;
  int minSessionTimeoutMs = 0;
  int maxSessionTimeoutMs = 0;
};

// Parses a `conf` answer ("key=value" lines); nullopt without a tickTime.
std::optional<EnsembleConf> parseEnsembleConf(const std::string& text);

// Asks each server of `connectString` ("host:port[,host:port...]") for `conf`, each
// within `timeout`; nullopt when none answers with a tickTime (4lw not whitelisted, or
// no server reachable). Blocks: for a process starting, before its loop runs.
std::optional<EnsembleConf> readEnsembleConf(const std::string& connectString, std::chrono::milliseconds timeout);

}  // namespace dugong::zk
