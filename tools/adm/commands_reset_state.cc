// reset-state: removes a cluster's state node from ZooKeeper, so that the cluster is set
// up again from nothing: how a restore from a backup starts over (README "Backups").
// Refused while an agent of the cluster runs (it has an election node): it would set the
// cluster up again at once from its own data. Refused too while a promise of the
// failsafe may still be in force (docs/isolated-primary.md): a primary whose session
// expired may write on under its sync's promise, which neither has an election node nor
// lasts beyond agent::kFailsafeMaxDurationMs after the sync's last grant. So reset-state also
// asks the agents the state names whether they run (over HTTP), then waits that long
// (--promise-wait-ms) watching that no agent joins and the state does not change, and
// asks again. Asks for confirmation (--yes), writes what it removes to a record file
// first (nothing is removed when that fails), and removes the node at the version read;
// the state history and the cluster configuration stay.
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "driver/failsafe.h"

#include "statemachine/time_format.h"
#include "tools/adm/commands.h"

namespace dugong::adm {
namespace {

struct ResetArgs {
  bool yes = false;
  std::string record;
  // The longest promise, and a second for the primary's own stop.
  int64_t promiseWaitMs = driver::kFailsafeMaxDurationMs + 1000;
};

// The agents of the peers the state names that answer over HTTP, though none has an
// election node ("" when none answers, or the state cannot be read as one).
std::string agentsThatAnswer(zk::Client& client, const CommonOptions& common) {
  auto view = fetchView(client, common.cluster, /*agents=*/true, std::chrono::seconds(2));
  if (!view) return "";
  std::string ids;
  for (const auto& p : view->peers) {
    if (p.reachable()) ids += (ids.empty() ? "" : ", ") + p.identity.id;
  }
  return ids;
}

// Why the state may not be removed now ("" when it may): an agent of the cluster runs
// (an election node, or an answer over HTTP), or the state changed since `version`.
std::string whyNotNow(zk::Client& client, const CommonOptions& common, int32_t version) {
  auto active = client.activePeers();
  if (!active) return "reading the active peers: " + active.error();
  if (!active->empty()) {
    std::string ids;
    for (const auto& p : *active) ids += (ids.empty() ? "" : "; ") + p.id + ": " + whyActiveNow(client, common, p.id);
    return "peers of cluster " + common.cluster + " are in ZooKeeper (" + ids +
           "); a running agent would set the cluster up again from its data at once. Stop every agent first, "
           "and let the sessions end";
  }
  auto state = client.readState();
  if (!state) return "reading the cluster state: " + state.error();
  if (!state->exists || state->version != version) return "the cluster state changed meanwhile";
  if (auto ids = agentsThatAnswer(client, common); !ids.empty()) {
    return "the agents of " + ids + " answer over HTTP though they have no election node (cut off from ZooKeeper?): "
           "a primary among them may write on under its sync's promise. Stop every agent first";
  }
  return "";
}

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
  if (auto why = whyNotNow(*client, common, state->version); !why.empty()) {
    return fail(kExitFailed, "refused, nothing removed: " + why);
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
  if (a.promiseWaitMs > 0) {
    std::cout << "no agent of cluster " << common.cluster << " runs; waiting " << a.promiseWaitMs
              << " ms before removing the state: a primary cut off from ZooKeeper may write on under its sync's "
                 "promise for up to "
              << driver::kFailsafeMaxDurationMs << " ms after the last one was given (--promise-wait-ms)\n"
              << std::flush;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.promiseWaitMs);
    for (;;) {
      if (auto why = whyNotNow(*client, common, state->version); !why.empty()) {
        return fail(kExitFailed, "refused while waiting, nothing removed: " + why);
      }
      if (std::chrono::steady_clock::now() >= end) break;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::seconds(1), end - std::chrono::steady_clock::now()));
    }
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
                                   "from a backup starts over); refused while any agent runs, and done only after "
                                   "the longest promise of the failsafe has had time to end");
  reset->add_flag("--yes,-y", a->yes, "do not ask for confirmation");
  reset->add_option("--record", a->record,
                    "where to write what is removed (default dugong-<cluster>-state-removed-<ms>.json here)");
  reset->add_option("--promise-wait-ms", a->promiseWaitMs,
                    "how long to wait, watching that no agent runs, before removing (default: the longest promise "
                    "of the failsafe and a second); shorter only when every primary's postgres is known stopped")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}));
  out.push_back({reset, [&common, a] { return runResetState(common, *a); }});
}

}  // namespace dugong::adm
