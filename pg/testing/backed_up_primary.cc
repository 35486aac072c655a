#include "pg/testing/backed_up_primary.h"

#include <utility>
#include <vector>

#include "pg/pgbackrest.h"

namespace dugong::pg::testing {

std::map<std::string, std::string> repositoryOptions(const PgTestCluster& cluster) {
  return {{"repo1-path", cluster.dir() + "/repo"},
          {"log-path", cluster.dir() + "/log"},
          {"lock-path", cluster.dir() + "/lock"}};
}

std::string startArchivingPrimary(const PgTestCluster& cluster, PgController& controller, const std::string& stanza,
                                  const std::map<std::string, std::string>& extra) {
  ClusterConfig config;
  config.backup = repositoryOptions(cluster);
  config.backup.insert(extra.begin(), extra.end());
  config.backup["archive"] = "on";
  config.backup["stanza"] = stanza;
  if (auto applied = controller.applyClusterConfig(config); !applied) return "the backup section: " + applied.error();
  auto applied = controller.apply(PgConfig::firstPrimary(std::nullopt));
  return applied.ok ? "" : "the first primary: " + applied.error;
}

std::string takeFullBackup(const PgTestCluster& cluster, const PgTestNode& primary, const std::string& stanza) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> steps{
      {"stanza-create", {}}, {"backup", {"--type=full", "--start-fast"}}};
  for (const auto& [command, args] : steps) {
    auto r = runPgBackRest(pgBackRestArgv(stanza, repositoryOptions(cluster), primary.options, command, args),
                           primary.options, std::chrono::seconds(300));
    if (!r.ok()) return "pgbackrest " + command + ": " + r.output;
  }
  return "";
}

}  // namespace dugong::pg::testing
