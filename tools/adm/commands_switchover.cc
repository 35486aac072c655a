// switchover [--candidate ID] [--leader ID] [--scheduled TIME]: one command makes any
// streaming peer the primary (ops/switchover_flow.h), now or at a given time.
#include <iostream>

#include "tools/adm/commands.h"
#include "tools/adm/schedule.h"
#include "ops/switchover_flow.h"

namespace dugong::adm {
namespace {

struct SwitchoverCli {
  std::string candidate;
  std::string leader;
  std::string scheduled;
  int waitWritableSeconds = 60;
};

int exitFor(const SwitchoverDone& d) {
  if (d.status == 200) return kExitOk;
  if (d.status == 404) return kExitUsage;  // no such peer: a bad argument
  return kExitFailed;
}

int report(const CommonOptions& common, const SwitchoverDone& d) {
  if (common.json) {
    nlohmann::json j = {{"ok", d.status == 200}, {"candidate", d.candidate}, {"steps", d.steps}};
    if (d.status != 200) j["error"] = d.error;
    if (d.writableAfterSeconds) j["writableAfterSeconds"] = *d.writableAfterSeconds;
    std::cout << j.dump(2) << "\n";
    return exitFor(d);
  }
  if (d.status != 200) {
    std::string error = d.error;
    if (!d.steps.empty()) {
      error += " (after " + std::to_string(d.steps.size()) + " of " + std::to_string(d.requests) +
               " promote requests; see `dugong-adm show`)";
    }
    return fail(exitFor(d), error);
  }
  std::cout << "switchover done: " << d.candidate << " is the writable primary\n";
  return kExitOk;
}

int runSwitchoverCommand(const CommonOptions& common, const SwitchoverCli& cli) {
  SwitchoverAsk ask;
  if (!cli.candidate.empty()) ask.candidate = cli.candidate;
  if (!cli.leader.empty()) ask.leader = cli.leader;
  auto scheduled = parseScheduledOption(cli.scheduled, nowMs());
  if (!scheduled) return fail(kExitUsage, scheduled.error());
  const std::optional<EpochMs> at = *scheduled;
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  if (at) {
    // Refused now what would be refused then, with what is known now; checked again then.
    auto check = checkSwitchover(*client, common.cluster, ask);
    if (check.status != 200) return report(common, check);
    client.reset();  // no session kept open while waiting
    waitUntilScheduled(*at, "switch over to " + check.candidate);
    client = connectOrFail(common, code);
    if (!client) return code;
  }
  SwitchoverOptions o;
  o.ask = ask;
  o.by = operatorReason("switchover");
  o.writableTimeout = std::chrono::seconds(cli.waitWritableSeconds);
  if (!common.json) o.progress = [](const std::string& line) { std::cout << line << "\n" << std::flush; };
  return report(common, runSwitchover(*client, common.cluster, o));
}

}  // namespace

void addSwitchoverCommand(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto cli = std::make_shared<SwitchoverCli>();
  auto* sub = app.add_subcommand(
      "switchover",
      "planned switchover in one command: the candidate (default: the sync) becomes the primary. An async takes "
      "one promote request per place it moves up (async[N]: N + 2), each written once the last is carried out; "
      "every request is checked first (streaming, lag, not frozen, nofailover)");
  sub->add_option("--candidate", cli->candidate, "the peer to become the primary: the sync or any async");
  sub->add_option("--leader", cli->leader, "the current primary's id: refused unless it is the primary");
  addScheduledOption(sub, cli->scheduled);
  sub->add_option("--wait-writable", cli->waitWritableSeconds, "seconds to wait for the new primary to be writable")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  out.push_back({sub, [&common, cli] { return runSwitchoverCommand(common, *cli); }});
}

}  // namespace dugong::adm
