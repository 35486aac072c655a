// dugong.conf: the postgres settings dugong manages, in a file of their own inside the
// data directory, included at the end of postgresql.conf. The file also records (in a
// comment line) the role it was written for, so that a restarted agent knows what the
// running postgres was told, e.g. that a primary was already made writable.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pg/options.h"
#include "pg/plan/standby_names.h"
#include "statemachine/standby.h"
#include "statemachine/result.h"

namespace dugong::pg {

struct ManagedState {
  // none, primary, sync, async, standby-leader (a standby cluster's leader, following a
  // source outside the cluster: docs/decisions/0083-standby-cluster.md 3.1)
  std::string role = "none";
  std::optional<std::string> upstreamId;   // standby: the peer streamed from
  std::string primaryConninfo;             // standby, standby-leader: how to reach it
  // standby-leader: what it follows, as SourceEndpoint::describe() names it ("hosts
  // h1:5432, h2:5432"), so that a restarted agent knows what runs.
  std::optional<std::string> source;
  // standby-leader of a dugong source: its cluster name, and the source peer it streams
  // from (id and pgUrl; none: no source peer chosen), so that a restarted agent with no
  // source peer chosen yet keeps following it (docs/decisions/0083 "Phase 7 as built",
  // pg::planLeaderEndpoint).
  std::optional<std::string> sourceCluster;
  std::optional<std::string> sourcePeerId;
  std::optional<std::string> sourcePeerUrl;
  // standby-leader with a source repository (0083 3.1, P6): its restore_command,
  // `pgbackrest archive-get` of the source's stanza (pg::restoreCommand); "" for none.
  // Not in the state line (as the conninfo); emptied in effect while replayUnhindered
  // (a fence: nothing more is restored, as nothing more is streamed).
  std::string restoreCommand;
  std::optional<std::string> syncId;       // primary: the sync's application name
  // primary fenced for the new sync `syncId`: the sync it had, which commits also wait
  // for (both must acknowledge) until the next apply names one sync again.
  std::optional<std::string> alsoSyncId;
  // primary, quorum mode (docs/decisions/0079-quorum-commit.md section 3): commits wait
  // for any k of these members, `ANY k ("m1", ...)`, whatever syncId and alsoSyncId say.
  // Recorded as quorumK and quorumMembers. REQUIRES: validQuorum(*quorum).ok().
  std::optional<StandbyQuorum> quorum;
  bool readOnly = false;                   // primary: default_transaction_read_only
  std::optional<std::string> slotName;     // standby: its replication slot on the upstream
  std::optional<std::string> upstreamUrl;  // standby: the upstream's pgUrl (no password)
  // The data directory last ran as a primary (not in recovery) and may hold WAL no
  // other peer has; cleared once it runs as a standby again. Role none keeps postgres
  // in recovery (standby.signal) so a manual start cannot accept writes; this records
  // that it must still be checked for divergence before it follows anyone.
  bool wasPrimary = false;
  // primary: writes stopped (the agent lost ZooKeeper): read-only whatever readOnly says.
  bool writesStopped = false;
  // standby fenced for a takeover: replay runs unhindered to the WAL's end, which becomes
  // initWal (pg/plan/fence.h planStandbyWalEnd): recovery_min_apply_delay 0 (a promotion
  // skips the delay too), max_standby_streaming_delay and max_standby_archive_delay 0
  // (conflicting queries are cancelled at once), whatever the settings say. Until the
  // next apply.
  bool replayUnhindered = false;
  bool readOnlyInEffect() const { return readOnly || writesStopped; }
  // In recovery, streaming from an upstream or a source: sync, async, standby-leader.
  bool streams() const { return role == "sync" || role == "async" || role == "standby-leader"; }

  nlohmann::json toJson() const;  // without the conninfo (it may hold a password)
  bool operator==(const ManagedState&) const = default;
};

inline constexpr const char* kManagedConfName = "dugong.conf";
inline constexpr const char* kIncludeLine = "include 'dugong.conf'  # added by dugong";

// The settings dugong writes unless `options.settings` names them (quoted as in the
// file), e.g. max_wal_senders 10, or 20 with wal_level logical.
std::map<std::string, std::string> defaultSettings(const PgOptions& options);

// The dugong source a standby leader follows, kept in its state line (sourceCluster,
// sourcePeer, sourcePeerUrl; no peer: none chosen) and read back by the next apply
// (docs/decisions/0083 "Phase 7 as built"). Any other endpoint records nothing.
void recordLeaderSource(ManagedState& state, const SourceEndpoint& source);
// The dugong source a state line says a standby leader followed; none for another role.
std::optional<SourceEndpoint> leaderSourceFollowed(const ManagedState& state);

// The file's text for these options and this state.
std::string renderManagedConf(const PgOptions& options, const ManagedState& state);
// The state recorded in a file written by renderManagedConf.
Result<ManagedState> parseManagedConf(const std::string& text);

// A postgresql.conf string value: 'x' with quotes and backslashes escaped.
std::string confQuote(const std::string& value);

}  // namespace dugong::pg
