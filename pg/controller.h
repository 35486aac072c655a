// PgController: the blocking half of the postgres adapter. Every method may block for
// up to the matching timeout of PgOptions; PgAdapter runs them on worker threads.
//
// Thread-safety: init/apply must be called from one thread at a time (the adapter's
// control worker). readWal/status/healthCheck/pollWritable may run concurrently with
// them (the adapter's query worker); pollWritable skips its turn while an apply runs.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>

#include "pg/command.h"
#include "pg/managed_conf.h"
#include "pg/options.h"
#include "pg/pg_status.h"
#include "pg/sql.h"
#include "statemachine/event.h"
#include "statemachine/pg_config.h"

namespace dugong::pg {

class PgController {
 public:
  // REQUIRES: validate(options).ok().
  explicit PgController(PgOptions options);
  PgController(const PgController&) = delete;
  PgController& operator=(const PgController&) = delete;

  const PgOptions& options() const { return options_; }

  // Looks at the data directory and the running postgres (if any). Never changes them.
  PgInitialized init();

  // Reconfigures postgres for `config`, then starts, reloads, promotes, rebuilds or
  // stops it to match. See DESIGN.md "Postgres roles". A primary with a downstream is
  // left read-only; pollWritable() makes it writable once the sync has caught up.
  PgConfigApplied apply(const PgConfig& config);

  // Stops acknowledging commits under the current topology, before a takeover reads
  // its initWal (statemachine/action.h, FencePg). A primary makes commits wait for
  // `newSync` (reload of synchronous_standby_names); a standby stops streaming (reload
  // with an empty primary_conninfo, then waits until its WAL receiver has stopped). A
  // stopped postgres acknowledges nothing: ok. The next apply() lifts the fence.
  PgFenced fence(const std::optional<PeerIdentity>& newSync);

  // The WAL position: pg_current_wal_lsn() on a primary, the greater of the last
  // received and last replayed positions on a standby.
  WalPositionRead readWal();

  PgStatus status();

  // SELECT 1 within the query timeout. An error message when unhealthy.
  Result<bool> healthCheck();

  // Whether a primary waits for its sync to catch up before it becomes writable.
  bool writablePending() const;
  // One check of the primary's sync: once it streams with sync_state 'sync' and its
  // flush position has reached the primary's position of the moment it was first seen
  // as sync, the primary is made writable (reload). Returns true if writable now.
  bool pollWritable();

 private:
  struct Pending {
    std::string syncId;
    std::optional<uint64_t> targetLsn;
  };

  // --- the data directory
  bool isSetUp() const;
  bool isRunning() const;
  bool hasStandbySignal() const;
  Result<bool> prepareDataDir(bool wipe);
  Result<bool> writeFileAsOwner(const std::string& path, const std::string& text, mode_t mode);
  Result<bool> writeConf(const ManagedState& state);
  Result<bool> writeHba();
  void setMarker(const std::string& what);
  void clearMarker();

  // --- running programs
  CommandResult run(const std::string& tool, std::vector<std::string> args, std::chrono::milliseconds timeout,
                    std::map<std::string, std::string> env = {});
  Result<bool> initdb();
  Result<bool> start();
  Result<bool> stop();
  Result<bool> reload();
  Result<bool> promote();
  Result<bool> waitSettings(const ManagedState& state);
  Result<bool> bootstrapRoles();

  // --- rebuilding
  // kAhead: same timeline, but further than the source: only a base backup helps.
  enum class Divergence { kCanFollow, kDiverged, kAhead, kUnknown };
  Divergence checkDivergence(const PeerIdentity& source, std::string* detail);
  Result<bool> rewind(const PeerIdentity& source);
  Result<bool> basebackup(const PeerIdentity& source);
  void discardOldDataDir();

  // --- roles
  PgConfigApplied applyNone();
  PgConfigApplied applyPrimary(const PgConfig& config);
  PgConfigApplied applyStandby(const PgConfig& config);

  // --- connections
  std::string localConninfo() const;
  Result<std::string> peerConninfo(const PeerIdentity& peer, bool forReplication) const;
  std::map<std::string, std::string> passwordEnv() const;
  Result<QueryResult> localQuery(const std::string& sql) const;
  std::string logTail() const;

  std::string oldDataDir() const { return options_.dataDir + ".dugong-old"; }
  std::string markerPath() const { return options_.dataDir + ".dugong-incomplete"; }

  PgOptions options_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;

  std::mutex applyMu_;            // held by apply; pollWritable only try_locks it
  mutable std::mutex stateMu_;    // guards state_ and pending_
  ManagedState state_;
  std::optional<Pending> pending_;
};

}  // namespace dugong::pg
