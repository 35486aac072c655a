// The dugong-adm subcommands. Each add* function declares its subcommands (options,
// --help text) on the application and registers what to run when one is chosen.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/adm/context.h"

namespace dugong::adm {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the exit code
  // False for a command that names no cluster through the common options (version, and
  // rebuild, which takes its agent's configuration): the default configuration file is
  // then not read, so that a broken or unrelated one cannot make it fail.
  bool usesClusterOptions = true;
};
using Commands = std::vector<Command>;

// show, peers, pg-status, history, verify
void addStatusCommands(CLI::App& app, const CommonOptions& common, Commands& out);
// freeze, unfreeze, promote, clear-promote, reap
void addMaintenanceCommands(CLI::App& app, const CommonOptions& common, Commands& out);
// switchover
void addSwitchoverCommand(CLI::App& app, const CommonOptions& common, Commands& out);
// config show, history, set, apply, edit
void addConfigCommands(CLI::App& app, const CommonOptions& common, Commands& out);
// restart, reload
void addRestartCommands(CLI::App& app, const CommonOptions& common, Commands& out);
// rebuild
void addRebuildCommand(CLI::App& app, const CommonOptions& common, Commands& out);
// reset-state
void addResetStateCommand(CLI::App& app, const CommonOptions& common, Commands& out);
// promote-cluster (docs/decisions/0083)
void addStandbyCommands(CLI::App& app, const CommonOptions& common, Commands& out);
// set-onwm, zk-state, zk-active
void addDeveloperCommands(CLI::App& app, const CommonOptions& common, Commands& out);

// `promote` of peer `id` in `role` (sync or async) with the default options: writes the
// request, waits for its outcome, prints it; returns the exit code.
int promotePeer(const CommonOptions& common, const std::string& id, const std::string& role);

// Connects to ZooKeeper with the common options; on failure prints why and sets `code`.
std::unique_ptr<zk::Client> connectOrFail(const CommonOptions& common, int& code);

// Declares --scheduled TIME on `sub` (switchover, restart), stored in `text`.
void addScheduledOption(CLI::App* sub, std::string& text);

// --scheduled: says what it waits for and until when, then sleeps until the wall clock
// reaches `at` (parseScheduled, tools/adm/schedule.h, bounds how far ahead).
void waitUntilScheduled(EpochMs at, const std::string& what);

// Asks "<question> [y/N] " on the terminal. Without a terminal on stdin, refuses (false)
// and says so, naming `flag` as the way to confirm.
bool confirm(const std::string& question, const std::string& flag);

}  // namespace dugong::adm
