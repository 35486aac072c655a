// Maintenance commands: freeze, unfreeze, promote, clear-promote, reap. Every write is
// a bounded test-and-set (updateState) that re-checks its preconditions on each attempt.
#include <functional>
#include <iostream>
#include <thread>

#include "ops/http_client.h"
#include "statemachine/promote_request.h"
#include "statemachine/time_format.h"
#include "tools/adm/commands.h"
#include "ops/promote_check.h"
#include "ops/promote_flow.h"

namespace dugong::adm {
namespace {

// Reports a finished update: text or JSON. `message` says what happened.
int report(const CommonOptions& common, const UpdateResult& r, const std::string& message) {
  if (common.json) {
    std::cout << nlohmann::json({{"ok", true},
                                 {"written", r.written},
                                 {"message", message},
                                 {"version", r.version},
                                 {"state", summarizeState(r.state)}})
                     .dump(2)
              << "\n";
  } else {
    std::cout << message << "\n";
  }
  return kExitOk;
}

// Connects, applies `change` with a bounded test-and-set, and reports `done` (or `noop`
// when the change found nothing to do).
int changeState(const CommonOptions& common, zk::Client& client,
                const std::function<Result<bool>(ClusterState&)>& change, const std::string& reason,
                const std::string& done, const std::string& noop = "") {
  auto r = updateState(client, change, operatorReason(reason));
  if (!r) return fail(kExitFailed, r.error());
  return report(common, *r, r->written ? done : noop);
}

int changeState(const CommonOptions& common, const std::function<Result<bool>(ClusterState&)>& change,
                const std::string& reason, const std::string& done, const std::string& noop = "") {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  return changeState(common, *client, change, reason, done, noop);
}

int runFreeze(const CommonOptions& common, const std::string& reason) {
  if (reason.find_first_not_of(" \t") == std::string::npos) return fail(kExitUsage, "freeze needs a reason: -r REASON");
  return changeState(
      common,
      [&](ClusterState& s) -> Result<bool> {
        if (s.frozen()) {
          return Error{"the cluster is already frozen (" + s.freeze.dump() +
                       "); unfreeze it first to freeze it for another reason"};
        }
        s.freeze = {{"date", formatIso8601(nowMs())}, {"reason", reason}};
        return true;
      },
      "freeze: " + reason, "frozen: " + reason);
}

int runUnfreeze(const CommonOptions& common) {
  return changeState(
      common,
      [](ClusterState& s) -> Result<bool> {
        if (!s.frozen()) return false;
        s.freeze = nullptr;
        return true;
      },
      "unfreeze", "unfrozen", "the cluster is not frozen; nothing to do");
}

int runClearPromote(const CommonOptions& common) {
  return changeState(
      common,
      [](ClusterState& s) -> Result<bool> {
        if (!s.hasPromote()) return false;
        s.promote = nullptr;
        return true;
      },
      "clear-promote", "promote request removed", "there is no promote request; nothing to do");
}

int runReap(const CommonOptions& common, const std::string& id, bool force) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto active = client->activePeers();
  if (!active) return fail(kExitUnavailable, "listing the active peers: " + active.error());
  return changeState(
      common, *client,
      [&](ClusterState& s) -> Result<bool> {
        int i = indexOfPeer(s.deposed, id);
        if (i < 0) {
          const std::string list = peerIds(s.deposed);
          return Error{id + " is not deposed (deposed: " + (list.empty() ? "none" : list) + "); nothing reaped"};
        }
        if (containsPeer(*active, id) && !force) {
          return Error{id + " is still in ZooKeeper (" + whyActiveNow(*client, common, id) +
                       "): rebuild it with `dugong-adm rebuild` on that peer, or stop its agent and let its session "
                       "end first (--force reaps it anyway)"};
        }
        s.deposed.erase(s.deposed.begin() + i);
        return true;
      },
      "reap " + id, id + " removed from deposed");
}

struct PromoteCli {
  PromoteArgs args;
  int64_t asyncIndex = -1;
  int waitWritableSeconds = 60;
};

int runPromote(const CommonOptions& common, PromoteCli cli) {
  PromoteArgs a = cli.args;
  if (cli.asyncIndex >= 0) a.asyncIndex = cli.asyncIndex;
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto view = fetchView(*client, common.cluster, true);
  if (!view) return fail(kExitUnavailable, view.error());
  auto request = buildPromoteRequest(*view, a);
  if (!request) return fail(kExitFailed, "not promoting: " + request.error());
  const nlohmann::json req = *request;

  auto w = writePromoteRequest(*client, req, view->state.generation,
                               operatorReason("promote " + a.id + " (" + a.role + ")"));
  if (!w) return fail(kExitFailed, "not promoting: " + w.error());
  if (!common.json) {
    std::cout << "promote request written: " << req.dump() << "\nwaiting for it to be carried out (until "
              << req["expireTime"].get<std::string>() << ")\n"
              << std::flush;
  }

  const PromoteWait waited =
      waitForPromote(*client, req, w->state, operatorReason("promote: removing its expired request"));
  const PromoteOutcome outcome = waited.outcome;
  const ClusterState& last = waited.last;
  const double took = waited.seconds;

  nlohmann::json result = {{"request", req}, {"outcome", outcomeName(outcome)}, {"seconds", took}};
  std::string message = waited.message;
  int exit = outcome == PromoteOutcome::kCarriedOut ? kExitOk
             : outcome == PromoteOutcome::kPending  ? kExitUnavailable
                                                    : kExitFailed;
  if (outcome == PromoteOutcome::kCarriedOut && (a.role != "async" || req.value("asyncIndex", 0) == 0)) {
    auto writable = waitWritable(last.primary, std::chrono::seconds(cli.waitWritableSeconds));
    result["writableAfterSeconds"] = writable ? nlohmann::json(*writable) : nlohmann::json(nullptr);
    if (writable) {
      message += "; primary " + last.primary.id + " is writable";
    } else {
      std::cerr << "dugong-adm: warning: primary " << last.primary.id << " is not writable "
                << cli.waitWritableSeconds << " s after the promotion; check `dugong-adm show`\n";
    }
  }
  result["state"] = summarizeState(last);
  result["message"] = message;
  if (common.json) {
    std::cout << result.dump(2) << "\n";
  } else {
    (exit == kExitOk ? std::cout : std::cerr) << (exit == kExitOk ? "" : "dugong-adm: ") << message << "\n";
  }
  return exit;
}

}  // namespace

int promotePeer(const CommonOptions& common, const std::string& id, const std::string& role) {
  PromoteCli cli;
  cli.args.id = id;
  cli.args.role = role;
  return runPromote(common, cli);
}

void addMaintenanceCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  {
    auto reason = std::make_shared<std::string>();
    auto* sub = app.add_subcommand("freeze", "freeze the cluster: no peer takes over or changes generation until "
                                             "it is unfrozen");
    sub->add_option("-r,--reason", *reason, "why (kept in the state and the history)")->required();
    out.push_back({sub, [&common, reason] { return runFreeze(common, *reason); }});
  }
  {
    auto* sub = app.add_subcommand("unfreeze", "unfreeze the cluster");
    out.push_back({sub, [&common] { return runUnfreeze(common); }});
  }
  {
    auto cli = std::make_shared<PromoteCli>();
    auto* sub = app.add_subcommand(
        "promote",
        "ask for a planned switchover: the sync takes over as primary (the primary is deposed), or async[0] "
        "becomes the sync, or async[N] moves up one place. Checks the request against the state and the lag, "
        "writes it, and waits for it to be carried out or to expire");
    sub->add_option("-i,--id", cli->args.id, "the peer to promote")->required();
    sub->add_option("-r,--role", cli->args.role, "its current role: sync or async")
        ->required()
        ->check(CLI::IsMember({"sync", "async"}));
    sub->add_option("--async-index", cli->asyncIndex, "its place in the async chain (checked against the state)");
    sub->add_option("--expire", cli->args.expireSeconds, "seconds the request stays valid")->capture_default_str();
    sub->add_option("--lag-to-ignore", cli->args.lagToIgnore,
                    "bytes the peer may lag behind its upstream and still be promoted")
        ->capture_default_str();
    sub->add_option("--wait-writable", cli->waitWritableSeconds,
                    "after a new primary or sync: seconds to wait for the primary to be writable")
        ->capture_default_str();
    out.push_back({sub, [&common, cli] { return runPromote(common, *cli); }});
  }
  {
    auto* sub = app.add_subcommand("clear-promote", "remove the promote request, if any");
    out.push_back({sub, [&common] { return runClearPromote(common); }});
  }
  {
    auto id = std::make_shared<std::string>();
    auto force = std::make_shared<bool>(false);
    auto* sub = app.add_subcommand("reap", "remove a permanently gone peer from the deposed list");
    sub->add_option("ID", *id, "the deposed peer's id")->required();
    sub->add_flag("--force", *force, "reap it even though it is still in ZooKeeper");
    out.push_back({sub, [&common, id, force] { return runReap(common, *id, *force); }});
  }
}

}  // namespace dugong::adm
