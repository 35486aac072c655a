// dugong-adm: the operator's tool for a dugong cluster (see docs/dugong-adm.1).
#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "ops/http_client.h"
#include "dugong/version.h"
#include "tools/adm/commands.h"
#include "tools/adm/config_file.h"

int main(int argc, char** argv) {
  using namespace dugong::adm;
  CLI::App app{"dugong-adm: inspect and operate a dugong cluster (PostgreSQL HA coordinated by ZooKeeper)",
               "dugong-adm"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("dugong-adm ") + dugong::kVersion, "print the version and exit");
  app.fallthrough();
  app.footer("Exit status: 0 ok; 1 the operation failed or verify found a problem; 2 bad arguments; "
             "3 ZooKeeper unreachable or no such cluster.\nSee dugong-adm(1).");
  CommonOptions common;
  app.add_option("-z,--zk", common.zk, "ZooKeeper servers, host:port[,host:port...][/chroot]")
      ->envname("DUGONG_ZK");
  app.add_option("-c,--cluster", common.cluster, "cluster name (its root is /dugong/NAME)")->envname("DUGONG_CLUSTER");
  app.add_option("--root", common.root, "the cluster's root node, instead of /dugong/NAME");
  app.add_flag("--json", common.json, "machine-readable JSON output");
  app.add_option("--zk-auth-file", common.zkAuthFile,
                 "file whose first line is the ZooKeeper credentials user:password (the agents' zookeeper.auth)")
      ->envname("DUGONG_ZK_AUTH_FILE");
  app.add_option("--config", common.configFile,
                 "a dugong.yaml (the agent's will do) for the cluster, ZooKeeper and its credentials; default "
                 "/etc/dugong/dugong.yaml when it exists and no ZooKeeper is given")
      ->envname("DUGONG_CONFIG");
  std::string httpCaFile;
  app.add_option("--http-ca-file", httpCaFile,
                 "PEM file of the CAs that signed the agents' HTTPS certificates (besides the system's)")
      ->envname("DUGONG_HTTP_CA_FILE");
  app.add_option("--timeout", common.timeoutSeconds, "seconds to wait for ZooKeeper (connect and each call)")
      ->capture_default_str();

  Commands commands;
  addStatusCommands(app, common, commands);
  addMaintenanceCommands(app, common, commands);
  addSwitchoverCommand(app, common, commands);
  addConfigCommands(app, common, commands);
  addRestartCommands(app, common, commands);
  addRebuildCommand(app, common, commands);
  addResetStateCommand(app, common, commands);
  addDeveloperCommands(app, common, commands);
  addStandbyCommands(app, common, commands);
  auto* version = app.add_subcommand("version", "print the version of dugong-adm and exit");
  commands.push_back({version,
                      [] {
                        std::cout << "dugong-adm " << dugong::kVersion << "\n";
                        return kExitOk;
                      },
                      false});

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  const Command* command = nullptr;
  for (const auto& c : commands) {
    if (c.app->parsed()) command = &c;
  }
  if (!command) return fail(kExitUsage, "no command given; see dugong-adm --help");
  std::string configFile = common.configFile;
  if (configFile.empty() && common.zk.empty() && command->usesClusterOptions &&
      ::access(kDefaultConfigFile, R_OK) == 0) {
    configFile = kDefaultConfigFile;
  }
  if (!configFile.empty()) {
    if (auto ok = applyConfigFile(configFile, common); !ok) return fail(kExitUsage, ok.error());
  }
  dugong::agent::setHttpsCaFile(httpCaFile);
  return command->run();
}
