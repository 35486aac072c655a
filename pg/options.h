// Configuration of the postgres adapter, validated once at start.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pg/tls.h"
#include "statemachine/result.h"

namespace dugong::pg {

struct PgOptions {
  // The data directory. Created (owned by `osUser`, mode 0700) when it does not exist.
  // Its parent must exist; the adapter also keeps `<dataDir>.dugong-old` there while a
  // rebuild is in progress.
  std::string dataDir;
  // The postgres log file (stderr of the postmaster). Default: `<dataDir>.log`.
  std::string logFile;
  int port = 5432;
  // postgres' listen_addresses. "*" or "0.0.0.0" means all; the adapter itself then
  // connects to 127.0.0.1.
  std::string listenAddress = "127.0.0.1";
  // Where pg_ctl, initdb, postgres, pg_basebackup, pg_rewind and pg_controldata live.
  std::string binDir = "/usr/lib/postgresql/15/bin";
  // The unprivileged OS user every postgres binary runs as (never root).
  std::string osUser = "postgres";

  // The superuser. The adapter itself connects as it through the local socket (see
  // socketDir), where pg_hba trusts it; over TCP (loopback only) it authenticates with
  // scram-sha-256 when superuserPassword is set, with trust only under allowTrust, and
  // not at all otherwise. The password is set when a brand-new primary is initialised.
  std::string superuser = "postgres";
  std::optional<std::string> superuserPassword;
  // The role standbys replicate as (and pg_rewind reads its source as). Created when
  // a brand-new primary is initialised, with REPLICATION LOGIN and only what pg_rewind
  // needs from its source (see docs/design.md "Secure by default"). Authenticates with
  // scram-sha-256; required unless allowTrust is set and replicationCidr is loopback.
  std::string replicationUser = "dugong_repl";
  std::optional<std::string> replicationPassword;
  // Addresses allowed to replicate, in pg_hba CIDR form.
  std::string replicationCidr = "0.0.0.0/0";
  // Allows `trust` over TCP: for the superuser on loopback when it has no password, for
  // the replication role when it has none (only with a loopback replicationCidr). Off
  // by default; the agent warns at every start when it is on. For demos and tests.
  bool allowTrust = false;
  // The directory of postgres' Unix socket (mode 0700, owned by osUser, so only root
  // and osUser reach it). Default: `<dataDir>.socket`.
  std::string socketDir;
  // Replication slots: each peer's downstream streams through a physical slot named
  // after it on its upstream, created and dropped with the topology. A slot keeps at
  // most this much WAL (postgres' max_slot_wal_keep_size); a standby further behind
  // loses its slot and must be rebuilt, it never fills the disk. "-1" means no bound.
  std::string maxSlotWalKeepSize = "16GB";
  // TLS: postgres' certificate, hostssl-only pg_hba, and sslmode of every TCP
  // connection dugong makes to a postgres (pg/tls.h).
  PgTls tls;
  // Extra pg_hba.conf lines, appended as they are (validated: one line each).
  std::vector<std::string> extraHbaLines;

  // This peer's id: the application_name it streams with, the name a primary's
  // synchronous_standby_names uses for it.
  std::string peerId;

  // Extra postgresql.conf settings, written into the managed dugong.conf. Keys are
  // postgres setting names; values are quoted by the adapter. Must not name a setting
  // the adapter manages (port, primary_conninfo, synchronous_standby_names, ...).
  std::map<std::string, std::string> settings;

  // Allows replacing a data directory that holds another database system (a different
  // system identifier) or WAL its restore peer does not have. Never read from the
  // agent's configuration: only `dugong-adm rebuild --discard-data` sets it, as the
  // operator's explicit command. Without it such a standby apply fails, changing nothing.
  bool replaceUnknownData = false;

  // How the first primary of a new cluster makes its data directory: initdb (default),
  // or a restore of a pgBackRest backup (pg/pgbackrest.h BootstrapFromBackup: stanza,
  // repository options, recovery target), after which dugong's roles are set up as
  // after initdb. See docs/design.md "Backups".
  std::string bootstrapMethod = "initdb";
  std::string bootstrapStanza;
  std::map<std::string, std::string> bootstrapRepo;
  std::string bootstrapTarget;

  // Prefer pg_rewind over pg_basebackup to rebuild a diverged data directory.
  bool useRewind = true;

  std::chrono::seconds initdbTimeout{120};
  std::chrono::seconds startTimeout{120};
  std::chrono::seconds stopTimeout{60};
  std::chrono::seconds promoteTimeout{60};
  std::chrono::seconds basebackupTimeout{3600};
  std::chrono::seconds rewindTimeout{1800};
  std::chrono::milliseconds queryTimeout{5000};
  // Interval of the health check (SELECT 1) and of the primary's check whether its
  // sync has caught up.
  std::chrono::milliseconds healthInterval{1000};
  std::chrono::milliseconds writablePollInterval{20};
  // A running standby that cannot follow its upstream (not streaming, and its log says
  // why: a timeline that forked before its position, WAL already removed) this long is
  // reported unhealthy by the health check, and the next apply (the agent's restart)
  // repairs it: pg_rewind, else pg_basebackup, instead of a reload.
  std::chrono::seconds repairStandbyAfter{60};
  // A primary drops the replication slot of a peer that is not its sync only once the
  // slot has been seen inactive this long: a peer being rebuilt or rejoined creates its
  // slot before its postgres starts to stream through it.
  std::chrono::seconds dropInactiveSlotAfter{300};

  // The log file, defaulted.
  std::string logPath() const { return logFile.empty() ? dataDir + ".log" : logFile; }
  // The host the adapter connects to for its own postgres over TCP.
  std::string localHost() const;
  // The socket directory, defaulted.
  std::string socketPath() const { return socketDir.empty() ? dataDir + ".socket" : socketDir; }
};

// Checks everything that can be checked before touching postgres: paths, the OS user
// (exists, not root), binaries present and executable, port range, names, settings,
// authentication (no password-less replication beyond loopback, none at all without
// allowTrust). Returns the first problem as a precise message.
Result<bool> validate(const PgOptions& options);

// The rules for `settings` (names, managed settings, one-line values, wal_level replica
// or logical) and for pg_hba lines (one non-empty line each), also applied to the
// cluster-wide configuration (pg/cluster_config.h).
Result<bool> validateSettings(const std::map<std::string, std::string>& settings);
Result<bool> validateHbaLines(const std::vector<std::string>& lines);

// The settings the adapter writes itself; `settings` may not name them.
const std::vector<std::string>& managedSettingNames();

// Whether a pg_hba CIDR covers only loopback addresses (127.0.0.0/8, ::1).
bool isLoopbackCidr(const std::string& cidr);

}  // namespace dugong::pg
