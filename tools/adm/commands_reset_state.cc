// reset-state: removes a cluster's state node from ZooKeeper, so that the cluster is set
// up again from nothing: how a restore from a backup starts over (README "Backups").
// Refused while an agent of the cluster runs (it has an election node): it would set the
// cluster up again at once from its own data. Asks for confirmation (--yes), writes what
// it removes to a record file first (nothing is removed when that fails), and removes
// the node at the version read; the state history and the cluster configuration stay.
#include <fstream>
#include <iostream>

#include "statemachine/time_format.h"
#include "tools/adm/commands.h"

namespace dugong::adm {
namespace {

struct ResetArgs {
  bool yes = false;
  std::string record;
};

int runResetState(const CommonOptions& common, const ResetArgs& a) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto state = client->readState();
  if (!state) return fail(kExitFailed, "reading the cluster state: " + state.error());
  if (!state->exists) {
    std::cout << "cluster " << common.cluster << " has no state in ZooKeeper; nothing removed\n";
    return kExitOk;
  }
  auto active = client->activePeers();
  if (!active) return fail(kExitFailed, "reading the active peers: " + active.error());
  if (!active->empty()) {
    std::string ids;
    for (const auto& p : *active) ids += (ids.empty() ? "" : ", ") + p.id;
    return fail(kExitFailed, "refused, nothing removed: agents of cluster " + common.cluster +
                                 " run (" + ids + "); they would set the cluster up again from their data at once. "
                                 "Stop every agent first");
  }
  auto parsed = nlohmann::json::parse(state->data, nullptr, /*allow_exceptions=*/false);
  const std::string summary = parsed.is_object() ? "generation " + parsed.value("generation", nlohmann::json()).dump() +
                                                       ", primary " +
                                                       parsed.value("primary", nlohmann::json::object())
                                                           .value("id", std::string("?"))
                                                 : std::string("unreadable state");
  if (!a.yes && !confirm("remove the state of cluster " + common.cluster + " (" + summary + ")?", "--yes")) {
    return fail(kExitFailed, "not confirmed; nothing removed");
  }
  const EpochMs now = nowMs();
  const std::string recordPath =
      a.record.empty() ? "dugong-" + common.cluster + "-state-removed-" + std::to_string(now) + ".json" : a.record;
  nlohmann::json record = {{"cluster", common.cluster},       {"root", client->layout().root()},
                           {"removedAt", formatIso8601(now)}, {"version", state->version},
                           {"state", parsed.is_discarded() ? nlohmann::json(state->data) : parsed}};
  {
    std::ofstream out(recordPath, std::ios::trunc);
    out << record.dump(2) << "\n";
    out.flush();
    if (!out) return fail(kExitFailed, "cannot write the record " + recordPath + "; nothing removed");
  }
  auto removed = client->deleteState(state->version);
  if (!removed) {
    return fail(kExitFailed, "removing the state (version " + std::to_string(state->version) +
                                 ") failed, it may have changed meanwhile: " + removed.error());
  }
  std::cout << "removed the state of cluster " << common.cluster << " (" << summary << ", version "
            << state->version << "); what was removed is in " << recordPath
            << " and in the state history (dugong-adm history). The first agent to start sets the cluster up again: "
               "from its data directory if it has one, else by postgres.bootstrap (initdb or a pgBackRest restore)\n";
  return kExitOk;
}

}  // namespace

void addResetStateCommand(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto a = std::make_shared<ResetArgs>();
  auto* reset = app.add_subcommand("reset-state",
                                   "remove the cluster's state from ZooKeeper so that it is set up again (a restore "
                                   "from a backup starts over); refused while any agent runs");
  reset->add_flag("--yes,-y", a->yes, "do not ask for confirmation");
  reset->add_option("--record", a->record,
                    "where to write what is removed (default dugong-<cluster>-state-removed-<ms>.json here)");
  out.push_back({reset, [&common, a] { return runResetState(common, *a); }});
}

}  // namespace dugong::adm
