// Status commands: show, peers, pg-status, history, verify.
#include <iostream>
#include <limits>
#include <set>
#include <thread>

#include "statemachine/data_state.h"
#include "tools/adm/commands.h"
#include "tools/adm/history_summary.h"
#include "tools/adm/quorum_view.h"
#include "tools/adm/standby_view.h"
#include "tools/adm/table.h"
#include "tools/adm/verify.h"

namespace dugong::adm {
namespace {

struct TableArgs {
  bool noHeader = false;
  std::string columns;
  std::string role;
  bool wide = false;
  double period = 0;
  int count = 0;
};

void addTableOptions(CLI::App* sub, TableArgs& a) {
  sub->add_flag("-H,--omit-header", a.noHeader, "do not print the header line");
  std::string names;
  for (const auto& c : allColumns()) names += (names.empty() ? "" : ",") + c;
  sub->add_option("-o,--columns", a.columns, "comma-separated columns to print, in this order: " + names);
  std::string roles;
  for (const auto& r : knownRoles()) roles += (roles.empty() ? "" : ", ") + r;
  sub->add_option("-r,--role", a.role, "only peers with this role (" + roles + ")")
      ->check(CLI::IsMember(knownRoles()));
}

std::string freezeLine(const ClusterState& s) {
  if (!s.frozen()) return "not frozen";
  if (!s.freeze.is_object()) return "frozen";
  return "frozen since " + s.freeze.value("date", std::string("?")) + ": " + s.freeze.value("reason", std::string("?"));
}

nlohmann::json rowsJson(const std::vector<StatusRow>& rows, const std::vector<std::string>& columns) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& c : columns) o[c] = r.cells.value(c, nlohmann::json(nullptr));
    out.push_back(std::move(o));
  }
  return out;
}

std::string rowsTable(const std::vector<StatusRow>& rows, const std::vector<std::string>& columns, bool header) {
  std::vector<TableRow> cells;
  for (const auto& r : rows) {
    TableRow t;
    for (const auto& c : columns) t.push_back(r.cell(c));
    cells.push_back(std::move(t));
  }
  return formatTable(columns, cells, header);
}

nlohmann::json findingsJson(const std::vector<Finding>& findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : findings) out.push_back({{"problem", f.problem}, {"text", f.text}});
  return out;
}

// Prints the findings: problems always, passed checks with `verbose`.
void printFindings(const std::vector<Finding>& findings, bool verbose) {
  int problems = 0;
  for (const auto& f : findings) {
    if (f.problem) ++problems;
    if (f.problem || verbose) std::cout << (f.problem ? "problem: " : "ok:      ") << f.text << "\n";
  }
  std::cout << (problems == 0 ? std::string("no problems found")
                              : std::to_string(problems) + (problems == 1 ? " problem" : " problems") + " found")
            << "\n";
}

// No cluster state: what the present peers published about their data directories,
// from which the agents set the cluster up (docs/design.md "A lost cluster state").
int showNoState(zk::Client& client) {
  auto nodes = client.electionNodes();
  if (!nodes) return fail(kExitUnavailable, "reading the election: " + nodes.error());
  if (nodes->empty()) {  // nothing there at all: most likely a wrong name
    return fail(kExitUnavailable, "no cluster at " + client.layout().root() +
                                      ": no cluster state and no agent present (check -c/--cluster and --root)");
  }
  std::vector<TableRow> rows;
  std::set<std::string> systems;
  for (const auto& e : *nodes) {
    auto j = nlohmann::json::parse(e.data, nullptr, false);
    std::string data = "not published yet";
    if (j.is_object() && j.contains("data")) {
      auto d = PeerDataState::fromJson(j["data"]);
      data = d ? d->describe() : "invalid: " + d.error();
      if (d && d->setUp) systems.insert(d->systemId);
    }
    rows.push_back({e.identity ? e.identity->id : e.node, data});
  }
  std::cout << "no cluster state at " << client.layout().root()
            << ": the agents set the cluster up from the present peer with the most advanced WAL\n\n"
            << formatTable({"peer", "data directory"}, rows, true);
  if (systems.size() > 1) {
    std::cout << "\nproblem: the peers hold different database systems; nobody sets the cluster up until an "
                 "operator stops the agents of the peers whose data is not wanted and moves their data "
                 "directories away (or starts them under another cluster name)\n";
  }
  return kExitUnavailable;
}

int runShow(const CommonOptions& common, bool verbose) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto st = client->readState();
  if (st && !st->exists && !common.json) return showNoState(*client);
  auto view = fetchView(*client, common.cluster, true, std::chrono::seconds(3), ClusterState::Formats::kAll);
  if (!view) return fail(kExitUnavailable, view.error());
  const ClusterState& s = view->state;
  auto rows = statusRows(*view);
  labelStandbyLeader(*view, rows);
  labelQuorumMembers(s, rows);
  auto findings = verifyCluster(*view);
  const auto& columns = verbose ? pgStatusWideColumns() : pgStatusDefaultColumns();
  // Settings changed that each peer's postgres runs only after a restart.
  nlohmann::json pending = nlohmann::json::object();
  std::string pendingText;
  for (const auto& p : view->peers) {
    if (!p.reachable() || !p.status.contains("postgres")) continue;
    const auto& names = p.status["postgres"].value("pendingRestart", nlohmann::json::array());
    if (!names.is_array() || names.empty()) continue;
    pending[p.identity.id] = names;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n.get<std::string>();
    pendingText += (pendingText.empty() ? "" : "; ") + p.identity.id + ": " + list;
  }
  if (common.json) {
    nlohmann::json out = {{"cluster", view->cluster},       {"root", view->root},
                          {"version", view->version},       {"generation", s.generation},
                          {"mode", s.oneNodeWriteMode ? "one-node-write" : "normal"},
                          {"replication", replicationJson(s)},
                          {"frozen", s.frozen()},           {"freeze", s.freeze},
                          {"promote", s.promote},           {"initWal", s.initWal.toString()},
                          {"state", s.toJson()},            {"peers", rowsJson(rows, allColumns())},
                          {"problems", nlohmann::json::array()}, {"pendingRestart", pending}};
    for (const auto& f : findings) {
      if (f.problem) out["problems"].push_back(f.text);
    }
    if (verbose) out["checks"] = findingsJson(findings);
    out["standby"] = standbyShowJson(*view);
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<TableRow> head = {
      {"cluster", view->cluster.empty() ? view->root : view->cluster + " (" + view->root + ")"},
      {"generation", std::to_string(s.generation) + " (state version " + std::to_string(view->version) + ")"},
      {"mode", s.oneNodeWriteMode ? "one-node-write (the primary writes alone)"
               : s.standby        ? "standby cluster (follows a source, accepts no writes)"
                                  : "normal"},
      {"replication", replicationLine(s)},
      {"freeze", freezeLine(s)},
      {"promote", s.hasPromote() ? s.promote.dump() : "none"},
      {"initWal", s.initWal.toString() + (s.initTimeline > 0 ? " on timeline " + std::to_string(s.initTimeline) : "")},
      {"pending", pendingText.empty() ? "none" : "restart: " + pendingText + " (dugong-adm restart --rolling)"},
  };
  for (auto& [label, text] : standbyShowLines(*view)) head.push_back({label, text});
  if (verbose) {
    const std::string active = peerIds(view->active);
    head.push_back({"in zookeeper", active.empty() ? "(none)" : active});
  }
  std::cout << formatTable({"", ""}, head, false) << "\n" << rowsTable(rows, columns, true) << "\n";
  printFindings(findings, verbose);
  return kExitOk;
}

int runTable(const CommonOptions& common, const TableArgs& a, const std::vector<std::string>& defaults,
             bool repeat) {
  std::vector<std::string> columns = defaults;
  if (!a.columns.empty()) {
    auto c = parseColumns(a.columns, allColumns());
    if (!c) return fail(kExitUsage, c.error());
    columns = *c;
  }
  if (repeat && (a.period < 0 || a.count < 0)) return fail(kExitUsage, "PERIOD and COUNT must not be negative");
  if (repeat && a.count > 0 && a.period <= 0) return fail(kExitUsage, "COUNT needs a PERIOD greater than 0");
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  // PERIOD alone repeats until interrupted; with COUNT, COUNT times.
  const int times = !repeat || a.period <= 0 ? 1 : (a.count > 0 ? a.count : -1);
  for (int i = 0; times < 0 || i < times; ++i) {
    if (i > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(a.period * 1000)));
      if (!common.json) std::cout << "\n";
    }
    auto view = fetchView(*client, common.cluster, true, std::chrono::seconds(3), ClusterState::Formats::kAll);
    if (!view) return fail(kExitUnavailable, view.error());
    auto all = statusRows(*view);
    labelStandbyLeader(*view, all);
    labelQuorumMembers(view->state, all);
    auto rows = filterRole(std::move(all), a.role);
    if (common.json) {
      std::cout << rowsJson(rows, columns).dump(times == 1 ? 2 : -1) << "\n";
    } else {
      std::cout << rowsTable(rows, columns, !a.noHeader);
    }
    std::cout.flush();
  }
  return kExitOk;
}

struct HistoryArgs {
  bool asJson = false;
  bool verbose = false;
  bool prune = false;
  static constexpr int64_t kNotGiven = std::numeric_limits<int64_t>::min();
  int64_t keep = kNotGiven;  // with prune: how many of the newest records stay
  bool yes = false;
};

// Removes the oldest history records, keeping the newest `keep` (>= 1, so never the
// newest). The state is never touched; each record is removed on its own (a record
// already gone is not an error), oldest first, so an interrupted prune leaves a
// contiguous history.
int pruneHistory(const CommonOptions& common, zk::Client& client, const HistoryArgs& a) {
  auto entries = client.history();
  if (!entries) return fail(kExitUnavailable, "reading the history: " + entries.error());
  const size_t keep = static_cast<size_t>(a.keep);
  if (entries->size() <= keep) {
    std::cout << "the history holds " << entries->size() << " records, no more than " << keep
              << " to keep: nothing to prune\n";
    return kExitOk;
  }
  const size_t remove = entries->size() - keep;
  const auto& oldestKept = (*entries)[remove];
  std::cout << "the history holds " << entries->size() << " records; removing the oldest " << remove << " ("
            << (*entries)[0].node << " to " << (*entries)[remove - 1].node << "), keeping " << keep << " from "
            << oldestKept.node << " on\n"
            << std::flush;
  if (!a.yes && !confirm("Remove " + std::to_string(remove) + " history records for good?", "-y")) {
    return fail(kExitFailed, "nothing removed");
  }
  for (size_t i = 0; i < remove; ++i) {
    const std::string path = client.layout().history() + "/" + (*entries)[i].node;
    if (auto d = client.deleteNode(path); !d) {
      return fail(kExitFailed, "removing " + path + ": " + d.error() + " (" + std::to_string(i) + " removed)");
    }
  }
  if (common.json) {
    std::cout << nlohmann::json({{"removed", remove}, {"kept", keep}}).dump(2) << "\n";
  } else {
    std::cout << "removed " << remove << " history records; " << keep << " kept\n";
  }
  return kExitOk;
}

int runHistory(const CommonOptions& common, const HistoryArgs& a) {
  if (a.prune != (a.keep != HistoryArgs::kNotGiven)) {
    return fail(kExitUsage, "history --prune needs --keep N, and --keep only goes with --prune");
  }
  if (a.prune && a.keep < 1) {
    return fail(kExitUsage, "--keep " + std::to_string(a.keep) + ": at least 1 record is kept (the newest is never "
                                                                 "removed)");
  }
  const bool asJson = a.asJson;
  const bool verbose = a.verbose;
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  if (a.prune) return pruneHistory(common, *client, a);
  auto entries = client->history();
  if (!entries) return fail(kExitUnavailable, "reading the history: " + entries.error());
  if (entries->empty()) {
    auto st = client->readState();
    if (st && !st->exists) return fail(kExitUnavailable, "no cluster at " + client->layout().root());
  }
  std::vector<HistoryItem> items;
  for (const auto& e : *entries) items.push_back(decodeHistoryRecord(e.sequence, e.data));
  auto summaries = summarizeHistory(items);
  if (asJson || common.json) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      nlohmann::json o = {{"sequence", it.sequence}, {"time", it.time}, {"summary", summaries[i]}};
      if (!it.reason.empty()) o["reason"] = it.reason;
      if (it.state) o["generation"] = it.state->generation;
      o["state"] = it.raw;
      out.push_back(std::move(o));
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<TableRow> rows;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    rows.push_back({it.time.empty() ? "-" : it.time, it.state ? std::to_string(it.state->generation) : "-",
                    summaries[i]});
    if (verbose) {
      if (!it.reason.empty()) rows.push_back({"", "", "  reason: " + it.reason});
      rows.push_back({"", "", "  state:  " + (it.state ? summarizeState(*it.state).dump() : it.raw.dump())});
    }
  }
  std::cout << formatTable({"time", "gen", "change"}, rows, true);
  return kExitOk;
}

int runVerify(const CommonOptions& common, bool verbose, uint64_t maxLag) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto view = fetchView(*client, common.cluster, true, std::chrono::seconds(3), ClusterState::Formats::kAll);
  if (!view) return fail(kExitUnavailable, view.error());
  VerifyOptions o;
  o.maxLagBytes = maxLag;
  auto findings = verifyCluster(*view, o);
  if (common.json) {
    std::cout << nlohmann::json({{"ok", !anyProblem(findings)}, {"findings", findingsJson(findings)}}).dump(2)
              << "\n";
  } else {
    printFindings(findings, verbose);
  }
  return anyProblem(findings) ? kExitFailed : kExitOk;
}

}  // namespace

void addStatusCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  {
    auto verbose = std::make_shared<bool>(false);
    auto* sub = app.add_subcommand("show", "show the cluster: generation, mode, freeze, promote request, peers "
                                           "with roles and postgres status, and the problems verify finds");
    sub->add_flag("-v,--verbose", *verbose, "wide peer table, the checks that passed, the peers in ZooKeeper");
    out.push_back({sub, [&common, verbose] { return runShow(common, *verbose); }});
  }
  {
    auto a = std::make_shared<TableArgs>();
    auto* sub = app.add_subcommand("peers", "list the peers: role, id, zone, address, whether in ZooKeeper");
    addTableOptions(sub, *a);
    out.push_back({sub, [&common, a] { return runTable(common, *a, peersDefaultColumns(), false); }});
  }
  {
    auto a = std::make_shared<TableArgs>();
    auto* sub = app.add_subcommand(
        "pg-status", "postgres status of every peer: pg ok/fail, replication to its downstream (repl, sent, write, "
                     "flush, replay positions) and its replay lag; optionally every PERIOD seconds, COUNT times");
    addTableOptions(sub, *a);
    sub->add_flag("-w,--wide", a->wide, "print every column (zone, ip, timeline, WAL, write, lag in bytes)");
    sub->add_option("PERIOD", a->period, "repeat every PERIOD seconds (until interrupted, or COUNT times)");
    sub->add_option("COUNT", a->count, "how many times to print");
    out.push_back({sub, [&common, a] {
                     return runTable(common, *a, a->wide ? pgStatusWideColumns() : pgStatusDefaultColumns(), true);
                   }});
  }
  {
    auto a = std::make_shared<HistoryArgs>();
    auto* sub = app.add_subcommand("history", "every cluster-state write in order, with its time and a one-line "
                                              "summary of what changed; or, with --prune --keep N, remove the "
                                              "oldest records");
    sub->add_flag("-j", a->asJson, "JSON output (the same as --json), with every state in full");
    sub->add_flag("-v,--verbose", a->verbose, "also print the writer's reason and the state written");
    sub->add_flag("--prune", a->prune, "remove the oldest history records (never the state, never the newest record)");
    sub->add_option("--keep", a->keep, "with --prune: how many of the newest records to keep (at least 1)");
    sub->add_flag("-y,--yes", a->yes, "with --prune: do not ask for confirmation");
    out.push_back({sub, [&common, a] { return runHistory(common, *a); }});
  }
  {
    auto verbose = std::make_shared<bool>(false);
    auto maxLag = std::make_shared<uint64_t>(VerifyOptions{}.maxLagBytes);
    auto* sub = app.add_subcommand(
        "verify", "check the cluster: primary writable, sync streaming synchronously, asyncs streaming, lag, deposed "
                  "peers, freeze, stale promote request. Exit status 0 only when there is no problem");
    sub->add_flag("-v,--verbose", *verbose, "also print the checks that passed");
    sub->add_option("--max-lag", *maxLag, "bytes a standby may lag behind its upstream")->capture_default_str();
    out.push_back({sub, [&common, verbose, maxLag] { return runVerify(common, *verbose, *maxLag); }});
  }
}

}  // namespace dugong::adm
