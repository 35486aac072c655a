// The settings hot standby needs at least as high on a standby as on its primary
// (PostgreSQL refuses to run a standby below them): max_connections,
// max_worker_processes, max_wal_senders, max_prepared_transactions,
// max_locks_per_transaction. Pure helpers; the ordering they allow is described in
// docs/design.md "Cluster-wide configuration".
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dugong::pg {

// The five settings, by their postgresql.conf names.
const std::vector<std::string>& hotStandbySettings();

// The primary's values as a standby's pg_controldata shows them (it replays them from
// the primary's WAL): {"max_connections": 100, ...}; settings it does not show are left out.
std::map<std::string, long> hotStandbyValuesFromControlData(const std::string& controlDataOutput);

// `settings` with each of the five raised to at least `floor`. A setting absent from
// `settings` counts as its value in `defaults` (dugong's), else postgres' own default.
std::map<std::string, std::string> raiseToFloor(std::map<std::string, std::string> settings,
                                                const std::map<std::string, long>& floor,
                                                const std::map<std::string, std::string>& defaults);

// Whether postgres started for `role` ("primary", "sync", "async", "none") runs at least
// the floor its pg_control holds (the primary's values, replayed from its WAL or copied by
// pg_basebackup and pg_rewind): a standby does, before every start (PostgreSQL refuses to
// start one below them); a primary runs its own values, which its standbys then replay.
// The decision the adapter (pg/controller_datadir.cc) and the simulated postgres
// (sim/world/sim_postgres.cc) share.
bool startsAtHotStandbyFloor(const std::string& role);

// The settings postgres starts with for `role`: `settings`, raised to `controlFloor`
// (raiseToFloor) when startsAtHotStandbyFloor(role).
std::map<std::string, std::string> hotStandbyStartSettings(const std::string& role,
                                                           std::map<std::string, std::string> settings,
                                                           const std::map<std::string, long>& controlFloor,
                                                           const std::map<std::string, std::string>& defaults);

// Whether `after` lowers any of the five below `running` (a primary's values now): then
// the primary must run the new values before any standby does (restart it first).
std::vector<std::string> loweredHotStandbySettings(const std::map<std::string, std::string>& after,
                                                   const std::map<std::string, long>& running,
                                                   const std::map<std::string, std::string>& defaults);

}  // namespace dugong::pg
