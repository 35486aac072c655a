// Developer commands: set-onwm, zk-state, zk-active.
#include <iostream>

#include "statemachine/time_format.h"
#include "tools/adm/commands.h"
#include "tools/adm/table.h"

namespace dugong::adm {
namespace {

int runZkState(const CommonOptions& common) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto node = client->readState();
  if (!node) return fail(kExitUnavailable, "reading the cluster state: " + node.error());
  if (!node->exists) return fail(kExitUnavailable, "no cluster at " + client->layout().root());
  auto parsed = nlohmann::json::parse(node->data, nullptr, false);
  auto valid = ClusterState::parse(node->data);
  if (common.json) {
    nlohmann::json out = {{"path", client->layout().state()},
                          {"version", node->version},
                          {"state", parsed.is_discarded() ? nlohmann::json(node->data) : parsed}};
    if (!valid) out["invalid"] = valid.error();
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << (parsed.is_discarded() ? node->data : parsed.dump(2)) << "\n";
    std::cout << "(" << client->layout().state() << ", version " << node->version << ")\n";
    if (!valid) std::cerr << "dugong-adm: warning: this state is invalid: " << valid.error() << "\n";
  }
  return valid ? kExitOk : kExitFailed;
}

int runZkActive(const CommonOptions& common) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto nodes = client->electionNodes();
  if (!nodes) return fail(kExitUnavailable, "listing " + client->layout().election() + ": " + nodes.error());
  if (common.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& n : *nodes) {
      out.push_back({{"node", n.node},
                     {"sequence", n.sequence},
                     {"sessionId", n.ephemeralOwner},
                     {"identity", n.identity ? n.identity->toJson() : nlohmann::json(nullptr)}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<TableRow> rows;
  for (const auto& n : *nodes) {
    char session[32];
    std::snprintf(session, sizeof session, "0x%llx", static_cast<unsigned long long>(n.ephemeralOwner));
    if (n.identity) {
      rows.push_back({n.identity->id, n.identity->ip, n.identity->zoneId, n.node, session});
    } else {
      rows.push_back({"(invalid identity)", "-", "-", n.node, session});
    }
  }
  std::cout << formatTable({"peer", "ip", "zone", "node", "session"}, rows, true);
  return kExitOk;
}

int runSetOnwm(const CommonOptions& common, const std::string& mode, bool yes) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto st = readClusterState(*client);
  if (!st) return fail(kExitUnavailable, st.error());
  if (mode == "off") {
    if (!st->state.oneNodeWriteMode) {
      std::cout << "the cluster is not in one-node-write mode; nothing to do\n";
      return kExitOk;
    }
    return fail(kExitFailed, "one-node-write mode ends by itself: the primary leaves it as soon as another peer is in "
                             "ZooKeeper and the cluster is not frozen. Run `dugong-adm unfreeze` and start a second peer");
  }
  if (st->state.oneNodeWriteMode) {
    std::cout << "the cluster is in one-node-write mode already; nothing to do\n";
    return kExitOk;
  }
  if (!st->state.frozen()) {
    return fail(kExitFailed, "freeze the cluster first (`dugong-adm freeze -r ...`): one-node-write mode drops the "
                             "sync, and no peer may take over meanwhile");
  }
  if (!yes && !confirm("Drop the sync and the asyncs; " + st->state.primary.id +
                           " will acknowledge writes alone, with no replica. Continue?",
                       "-y")) {
    return fail(kExitFailed, "one-node-write mode not set");
  }
  auto r = updateState(
      *client,
      [&](ClusterState& s) -> Result<bool> {
        if (s.oneNodeWriteMode) return false;
        if (!s.frozen()) return Error{"the cluster was unfrozen meanwhile"};
        if (s.generation != st->state.generation) return Error{"the generation changed meanwhile"};
        s.oneNodeWriteMode = true;
        s.sync.reset();
        s.async.clear();
        s.promote = nullptr;
        return true;
      },
      operatorReason("set-onwm on"));
  if (!r) return fail(kExitFailed, r.error());
  std::cout << (r->written ? "one-node-write mode on: " + r->state.primary.id + " writes alone"
                           : std::string("the cluster is in one-node-write mode already"))
            << "\n";
  return kExitOk;
}

}  // namespace

void addDeveloperCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  {
    auto mode = std::make_shared<std::string>();
    auto yes = std::make_shared<bool>(false);
    auto* sub = app.add_subcommand("set-onwm", "developer: put a frozen cluster in one-node-write mode (the primary "
                                               "writes alone); \"off\" explains how the mode ends");
    sub->add_option("-m,--mode", *mode, "on or off")->required()->check(CLI::IsMember({"on", "off"}));
    sub->add_flag("-y,--yes", *yes, "do not ask for confirmation");
    out.push_back({sub, [&common, mode, yes] { return runSetOnwm(common, *mode, *yes); }});
  }
  {
    auto* sub = app.add_subcommand("zk-state", "developer: print the cluster state as stored in ZooKeeper "
                                               "(--json: with its path and version)");
    out.push_back({sub, [&common] { return runZkState(common); }});
  }
  {
    auto* sub = app.add_subcommand("zk-active", "developer: list the election nodes (the peers with a live session)");
    out.push_back({sub, [&common] { return runZkActive(common); }});
  }
}

}  // namespace dugong::adm
