// config show | history | set | apply | edit: the cluster-wide postgres configuration
// at <root>/config (pg/cluster_config.h). Every change is validated before it is
// written: the rules of `dugong --check`; what this host's dugong.yaml allows
// (pg/cluster_config_guard.h: no setting that runs a command, no value that breaks a
// guarantee, no unsafe hba line, unless clusterConfig.allowUnsafe lists it); and each
// value as the local postgres binary checks it at its start (pg/settings_catalog.h). A
// refused change writes nothing. A write is a test-and-set on the version read, with a
// history record. The replication block (replication.mode, .k, .size: docs/decisions/
// 0079) is checked against the cluster too (tools/adm/replication_change.h).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include "pg/cluster_config.h"
#include "pg/cluster_config_guard.h"
#include "pg/managed_conf.h"
#include "pg/settings_catalog.h"
#include "tools/adm/commands.h"
#include "tools/adm/config_file.h"
#include "tools/adm/quorum_view.h"
#include "tools/adm/replication_change.h"

namespace dugong::adm {
namespace {

const std::string kBackupPrefix = "backup.";
const std::string kReplicationPrefix = "replication.";

struct ConfigArgs {
  std::vector<std::string> assignments;  // KEY=VALUE
  std::vector<std::string> unset;
  std::vector<std::string> addHba, removeHba;
  std::string file;
  std::string binDir = "/usr/lib/postgresql/15/bin";
  std::string osUser = "postgres";
  bool yes = false;
};

// What this host's dugong.yaml says about the cluster configuration: the file named by
// --config ($DUGONG_CONFIG), else the agent's own file when it is there. Without one,
// nothing unsafe is allowed and no setting is overridden.
struct ThisHost {
  std::string file;  // "" when none
  pg::HostAllowance allowance;
  std::map<std::string, std::string> settings;  // postgres.settings
};

Result<ThisHost> readThisHost(const CommonOptions& common) {
  ThisHost out;
  out.file = common.configFile;
  if (out.file.empty() && ::access(kDefaultConfigFile, R_OK) == 0) out.file = kDefaultConfigFile;
  if (out.file.empty()) return out;
  try {
    YAML::Node top = YAML::LoadFile(out.file);
    if (auto allow = top["clusterConfig"]["allowUnsafe"]) {
      auto names = pg::parseAllowList(allow.as<std::vector<std::string>>());
      if (!names) return Error{out.file + ": clusterConfig.allowUnsafe: " + names.error()};
      out.allowance.allowUnsafe = std::move(names).value();
    }
    if (auto superuser = top["postgres"]["superuser"]) out.allowance.superuser = superuser.as<std::string>();
    if (auto settings = top["postgres"]["settings"]) out.settings = settings.as<std::map<std::string, std::string>>();
  } catch (const YAML::Exception& e) {
    return Error{out.file + ": " + e.what()};
  }
  return out;
}

struct ConfigRead {
  pg::ClusterConfig config;
  std::string bytes;     // as stored ("" when absent)
  int32_t version = -1;  // -1: absent
};

Result<ConfigRead> readConfig(zk::Client& client) {
  auto node = client.readConfig();
  if (!node) return Error{node.error()};
  ConfigRead out;
  if (!node->exists) return out;
  out.bytes = node->data;
  out.version = node->version;
  auto parsed = pg::ClusterConfig::parse(node->data);
  if (!parsed) return Error{client.layout().config() + ": " + parsed.error()};
  out.config = std::move(parsed).value();
  return out;
}

// The rules of --check, what this host allows, then the values as postgres checks them.
// Returns the restart-only settings.
Result<std::vector<std::string>> validateAgainstPostgres(const pg::ClusterConfig& c, const ConfigArgs& a,
                                                         const ThisHost& host) {
  if (auto ok = pg::validateClusterConfig(c); !ok) return Error{ok.error()};
  if (auto ok = pg::checkAllowed(c, host.allowance); !ok) {
    return Error{ok.error() + (host.file.empty() ? " (no dugong.yaml read here: --config names one)"
                                                 : " (this host's file: " + host.file + ")")};
  }
  if (auto ok = pg::checkWithPostgres(c.settings, a.binDir, a.osUser); !ok) {
    return Error{ok.error() + " (checked with " + a.binDir + "/postgres; --bin-dir names postgres' binaries)"};
  }
  auto catalog = pg::SettingsCatalog::load(a.binDir);
  if (!catalog) return Error{catalog.error() + " (--bin-dir names postgres' binaries)"};
  std::vector<std::string> restartOnly;
  for (const auto& [k, v] : c.settings) {
    if (const auto* info = catalog->find(k); info && info->needsRestart()) restartOnly.push_back(k);
  }
  return restartOnly;
}

// A change of the replication block checked against the cluster as it is now: its state
// (one-node-write mode), the present peers (their election nodes) and their agents.
Result<ReplicationCheck> checkReplicationAgainstCluster(zk::Client& client, const CommonOptions& common,
                                                        const pg::ClusterConfig& before,
                                                        const pg::ClusterConfig& next) {
  if (before.replication == next.replication) return ReplicationCheck{};
  auto nodes = client.electionNodes();
  if (!nodes) return Error{"reading the election: " + nodes.error()};
  const std::map<std::string, std::string> electionData = electionDataById(*nodes);
  auto st = client.readState();
  if (!st) return Error{"reading the cluster state: " + st.error()};
  ReplicationFacts facts;
  if (st->exists) {
    auto view = fetchView(client, common.cluster, true);
    if (!view) return Error{view.error()};
    facts = replicationFacts(*view, electionData);
  } else {  // no cluster yet: the peers already present, by their election nodes only
    for (const auto& e : *nodes) {
      if (!e.identity) continue;
      facts.present.push_back(PresentPeer{*e.identity, publishedStateFormat(e.data), std::nullopt});
    }
  }
  return checkReplicationChange(before.replication, next.replication, facts);
}

// Validates `next` and writes it at the version read; prints what changed.
int writeConfig(const CommonOptions& common, zk::Client& client, const ConfigRead& before,
                const pg::ClusterConfig& next, const ConfigArgs& a, const std::string& what) {
  auto host = readThisHost(common);
  if (!host) return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + host.error());
  auto restartOnly = validateAgainstPostgres(next, a, *host);
  if (!restartOnly) {
    return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + restartOnly.error());
  }
  auto replication = checkReplicationAgainstCluster(client, common, before.config, next);
  if (!replication) {
    return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + replication.error());
  }
  auto changed = pg::changedSettings(before.config.settings, next.settings);
  if (before.version >= 0 && changed.empty() && before.config.hba == next.hba &&
      before.config.backup == next.backup && before.config.replication == next.replication) {
    std::cout << "the cluster configuration already says so; nothing written\n";
    return kExitOk;
  }
  auto w = client.putConfigBytes(next.serialize(), before.version, operatorReason(what));
  if (!w.ok) {
    return fail(kExitFailed, w.lostRace ? "another writer changed the configuration meanwhile; nothing written: "
                                          "read it again (config show) and retry"
                                        : "writing the configuration: " + w.error);
  }
  pg::PgOptions hostOptions;
  hostOptions.settings = host->settings;
  const auto shadowed = pg::shadowedSettings(hostOptions, next);
  std::vector<std::string> pending;
  for (const auto& k : changed) {
    for (const auto& r : *restartOnly) {
      if (k == r) pending.push_back(k);
    }
  }
  for (const auto& warning : replication->warnings) std::cerr << "warning: " << warning << "\n";
  if (common.json) {
    std::cout << nlohmann::json({{"ok", true}, {"version", w.newVersion}, {"changed", changed},
                                 {"needRestart", pending}, {"hbaChanged", before.config.hba != next.hba},
                                 {"shadowedHere", shadowed},
                                 {"replication", next.replication ? next.replication->toJson() : nlohmann::json()},
                                 {"warnings", replication->warnings}})
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "cluster configuration written (version " << w.newVersion << "): every agent reloads postgres\n";
  if (before.config.replication != next.replication) {
    std::cout << "replication: "
              << (next.replication ? next.replication->describe()
                                   : std::string("none in the cluster configuration: each agent's dugong.yaml "
                                                 "replication block decides"))
              << "; the primary moves the cluster state there one step at a time (dugong-adm show)\n";
  }
  for (const auto& k : changed) {
    auto it = next.settings.find(k);
    std::cout << "  " << k << " = " << (it == next.settings.end() ? "(default)" : pg::confQuote(it->second)) << "\n";
  }
  for (const auto& k : shadowed) {
    std::cout << "this host overrides " << k << " in its postgres.settings (" << host->file
              << "): the cluster's value has no effect here; each agent logs the settings its host overrides\n";
  }
  if (before.config.backup != next.backup) {
    std::cout << "backup settings now:";
    for (const auto& [k, v] : next.backup) std::cout << " " << kBackupPrefix << k << "=" << v;
    std::cout << (next.backup.empty() ? " none" : "") << "\n";
    if (before.config.backup.count("archive") != next.backup.count("archive") ||
        (next.backup.count("archive") && before.config.backup.at("archive") != next.backup.at("archive"))) {
      std::cout << "archive_mode takes effect only at a restart of postgres; run: dugong-adm restart --rolling\n";
    }
  }
  if (!pending.empty()) {
    std::cout << "these take effect only at a restart of postgres (pending_restart until then): ";
    for (size_t i = 0; i < pending.size(); ++i) std::cout << (i ? ", " : "") << pending[i];
    std::cout << "\nrun: dugong-adm restart --rolling\n";
  }
  return kExitOk;
}

int runShow(const CommonOptions& common) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto r = readConfig(*client);
  if (!r) return fail(kExitFailed, r.error());
  std::cout << r->config.serialize();
  return kExitOk;
}

int runHistory(const CommonOptions& common) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto h = client->configHistory();
  if (!h) return fail(kExitFailed, h.error());
  nlohmann::json all = nlohmann::json::array();
  for (const auto& e : *h) {
    auto j = nlohmann::json::parse(e.data, nullptr, false);
    if (common.json) {
      all.push_back(j);
    } else if (!j.is_discarded()) {
      std::cout << j.value("time", "?") << "  " << j.value("reason", "") << "\n    "
                << (j.contains("state") ? j["state"].dump() : std::string("?")) << "\n";
    }
  }
  if (common.json) std::cout << all.dump(2) << "\n";
  return kExitOk;
}

int runSet(const CommonOptions& common, const ConfigArgs& a) {
  if (a.assignments.empty() && a.unset.empty() && a.addHba.empty() && a.removeHba.empty()) {
    return fail(kExitUsage, "config set needs KEY=VALUE, --unset KEY, --add-hba LINE or --remove-hba LINE");
  }
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto before = readConfig(*client);
  if (!before) return fail(kExitFailed, before.error());
  pg::ClusterConfig next = before->config;
  std::string what = "config set";
  for (const auto& k : a.unset) {  // first: `--unset replication replication.mode=sync` starts afresh
    if (k == "replication") {
      next.replication.reset();
    } else if (k.rfind(kReplicationPrefix, 0) == 0) {
      return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + k +
                                  " is not unset alone: --unset replication removes the whole block");
    }
  }
  std::vector<std::pair<std::string, std::string>> assignments;
  for (const auto& text : a.assignments) {
    auto kv = pg::parseAssignment(text);
    if (!kv) return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + kv.error());
    assignments.push_back(std::move(kv).value());
  }
  const bool namesMode = std::any_of(assignments.begin(), assignments.end(),
                                     [](const auto& kv) { return kv.first == kReplicationPrefix + "mode"; });
  for (size_t i = 0; i < assignments.size(); ++i) {
    const auto& [name, value] = assignments[i];
    const std::string& text = a.assignments[i];
    // backup.KEY: the backup section (pg/pgbackrest.h), not a postgres setting;
    // replication.KEY: the replication block (docs/decisions/0079).
    if (name.rfind(kReplicationPrefix, 0) == 0) {
      const std::string key = name.substr(kReplicationPrefix.size());
      if (!next.replication && !namesMode) {
        return fail(kExitUsage, "refused, the cluster configuration is unchanged: the cluster configuration has no "
                                "replication block yet: name replication.mode too (sync or quorum)");
      }
      if (!next.replication) next.replication = pg::ClusterReplication{};
      if (auto ok = pg::setReplicationField(*next.replication, key, value); !ok) {
        return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + ok.error());
      }
    } else if (name.rfind(kBackupPrefix, 0) == 0) {
      next.backup[name.substr(kBackupPrefix.size())] = value;
    } else {
      next.settings[name] = value;
    }
    what += " " + text;
  }
  for (const auto& k : a.unset) {
    if (k == "replication") {
      // done above
    } else if (k.rfind(kBackupPrefix, 0) == 0) {
      next.backup.erase(k.substr(kBackupPrefix.size()));
    } else {
      next.settings.erase(k);
    }
    what += " --unset " + k;
  }
  // pgBackRest's stanza is named after the cluster unless the operator names it.
  if (!next.backup.empty() && !next.backup.count("stanza") && !common.cluster.empty()) {
    next.backup["stanza"] = common.cluster;
  }
  for (const auto& line : a.removeHba) {
    auto it = std::find(next.hba.begin(), next.hba.end(), line);
    if (it == next.hba.end()) {
      return fail(kExitUsage, "refused: no hba line '" + line + "' in the cluster configuration");
    }
    next.hba.erase(it);
    what += " --remove-hba '" + line + "'";
  }
  for (const auto& line : a.addHba) {
    if (std::find(next.hba.begin(), next.hba.end(), line) == next.hba.end()) next.hba.push_back(line);
    what += " --add-hba '" + line + "'";
  }
  return writeConfig(common, *client, *before, next, a, what);
}

Result<pg::ClusterConfig> readFileConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::stringstream text;
  text << in.rdbuf();
  auto c = pg::ClusterConfig::parse(text.str());
  if (!c) return Error{path + ": " + c.error()};
  return c;
}

int runApply(const CommonOptions& common, const ConfigArgs& a) {
  auto next = readFileConfig(a.file);
  if (!next) return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + next.error());
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto before = readConfig(*client);
  if (!before) return fail(kExitFailed, before.error());
  return writeConfig(common, *client, *before, *next, a, "config apply " + a.file);
}

// Opens the configuration in $VISUAL / $EDITOR (vi) on a private temporary file, then
// applies the result as `config apply` does, at the version first read.
int runEdit(const CommonOptions& common, const ConfigArgs& a) {
  if (!::isatty(STDIN_FILENO)) return fail(kExitUsage, "config edit needs a terminal; use config apply FILE");
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto before = readConfig(*client);
  if (!before) return fail(kExitFailed, before.error());
  std::string dir = (std::filesystem::temp_directory_path() / "dugong-adm-config-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return fail(kExitFailed, "cannot create a temporary directory");
  const std::string path = dir + "/config.json";
  std::ofstream(path) << before->config.serialize();
  const char* editor = std::getenv("VISUAL") ? std::getenv("VISUAL") : std::getenv("EDITOR");
  // The editor needs the terminal: it runs in the foreground, through the shell as
  // $EDITOR is meant to be (it may hold arguments). The path is ours: no quote in it.
  int status = std::system((std::string(editor ? editor : "vi") + " '" + path + "'").c_str());
  auto next = readFileConfig(path);
  std::filesystem::remove_all(dir);
  if (status != 0) return fail(kExitFailed, "the editor failed; nothing written");
  if (!next) return fail(kExitUsage, "refused, the cluster configuration is unchanged: " + next.error());
  return writeConfig(common, *client, *before, *next, a, "config edit");
}

}  // namespace

void addConfigCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto* config = app.add_subcommand("config", "the cluster-wide postgres configuration (settings and pg_hba lines "
                                              "every peer applies): show, history, set, apply, edit");
  config->require_subcommand(1);
  auto a = std::make_shared<ConfigArgs>();
  auto binDir = [a](CLI::App* sub) {
    sub->add_option("--bin-dir", a->binDir, "postgres' binaries, to check each setting against")->capture_default_str();
    sub->add_option("--os-user", a->osUser, "the user postgres runs as for that check, when dugong-adm runs as root")
        ->capture_default_str();
  };
  auto* show = config->add_subcommand("show", "print the cluster configuration (JSON, the format apply reads)");
  out.push_back({show, [&common] { return runShow(common); }});
  auto* history = config->add_subcommand("history", "every write of the cluster configuration, oldest first");
  out.push_back({history, [&common] { return runHistory(common); }});
  auto* set = config->add_subcommand("set", "change settings and hba lines, validated first");
  set->add_option("KEY=VALUE", a->assignments,
                  "postgres settings to set, the value kept exactly (a trailing space included) or written "
                  "in single quotes ('%m [%p] ', '' for a quote inside); backup.KEY=VALUE sets the backup "
                  "section (archive=on, repo1-path=..., replica-methods=pgbackrest,basebackup); "
                  "replication.mode=sync|quorum, replication.k=K, replication.size=N the cluster's replication "
                  "(1 <= k < size; quorum: a commit waits for k of a set of size members)");
  set->add_option("--unset", a->unset, "settings to remove (back to the default); --unset replication removes "
                                       "the replication block (each agent's dugong.yaml decides again)");
  set->add_option("--add-hba", a->addHba, "a pg_hba.conf line to append");
  set->add_option("--remove-hba", a->removeHba, "a pg_hba.conf line to remove");
  binDir(set);
  out.push_back({set, [&common, a] { return runSet(common, *a); }});
  auto* apply = config->add_subcommand("apply", "replace the cluster configuration with FILE (as config show prints)");
  apply->add_option("FILE", a->file, "the configuration, JSON")->required();
  binDir(apply);
  out.push_back({apply, [&common, a] { return runApply(common, *a); }});
  auto* edit = config->add_subcommand("edit", "edit the cluster configuration in $VISUAL or $EDITOR, then apply it");
  binDir(edit);
  out.push_back({edit, [&common, a] { return runEdit(common, *a); }});
}

}  // namespace dugong::adm
