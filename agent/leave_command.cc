#include "agent/leave_command.h"

#include <signal.h>

#include <filesystem>
#include <fstream>

#include "agent/instance_lock.h"
#include "agent/process_stamp.h"
#include "agent/session_file.h"
#include "zk/c_client.h"
#include "zk/client.h"

namespace dugong::agent {
namespace {

// The postmaster of `dataDir` if one runs and it is not a standby (no standby.signal or
// recovery.signal): a postgres that may acknowledge commits.
std::optional<ProcessStamp> writablePostmaster(const std::string& dataDir) {
  long pid = 0;
  std::ifstream(dataDir + "/postmaster.pid") >> pid;
  auto p = processStamp(static_cast<int>(pid));
  if (!p || p->name != "postgres") return std::nullopt;
  std::error_code ec;
  if (std::filesystem::exists(dataDir + "/standby.signal", ec) ||
      std::filesystem::exists(dataDir + "/recovery.signal", ec)) {
    return std::nullopt;
  }
  return p;
}

// Before the session ends (and the sync takes over at once), a postgres that may still
// acknowledge commits is shut down: fast (SIGINT), then immediate (SIGQUIT) if it hangs.
// The watchdog the stopped agent left armed is ended too, so that it never signals a
// postgres started later. False when postgres would not stop.
bool shutDownWritablePostgres(const AgentConfig& config, std::ostream& out, std::ostream& err) {
  if (auto p = writablePostmaster(config.pg.dataDir)) {
    out << "postgres (pid " << p->pid << ") runs in " << config.pg.dataDir
        << " and is not a standby: shutting it down before leaving, so that it acknowledges no commit once "
           "another peer takes over\n";
    if (!endProcess(*p, SIGINT, std::chrono::seconds(60)) && !endProcess(*p, SIGQUIT, std::chrono::seconds(10))) {
      err << "dugong --leave: postgres (pid " << p->pid << ") did not stop; the session is kept (its peers do not "
          << "take over while postgres may still write): stop postgres, then run this again\n";
      return false;
    }
  }
  if (auto previous = readProcessRecord(config.watchdogRecordPath()); previous && *previous) {
    endProcess(**previous, SIGKILL, std::chrono::seconds(1));
  }
  return true;
}

}  // namespace

int leaveCluster(const AgentConfig& config, std::ostream& out, std::ostream& err) {
  auto lock = InstanceLock::acquire(config.instanceLockPath());
  if (!lock) {
    err << "dugong --leave: " << lock.error() << ": stop the agent first (e.g. systemctl stop dugong), then run "
        << "this again\n";
    return 1;
  }
  if (!shutDownWritablePostgres(config, out, err)) return 1;
  SessionFile file(config.sessionFile,
                   SessionOwner::current(config.identity.id, config.zk.chroot + config.zk.effectiveRoot(),
                                         config.pg.dataDir));
  auto saved = file.load();
  if (!saved) {
    err << "dugong --leave: " << saved.error() << "\n";
    return 1;
  }
  if (!*saved) {
    out << "no saved session in " << config.sessionFile << ": peer " << config.identity.id
        << " holds no ZooKeeper session (it left already, or its session expired)\n";
    return 0;
  }
  const auto& session = **saved;
  auto closed = zk::closeSessionFromOutside(config.zk.hosts(), session.sessionId, session.password);
  if (!closed && closed.error().find("had already expired") == std::string::npos) {
    err << "dugong --leave: could not end session " << zk::detail::sessionIdText(session.sessionId) << ": "
        << closed.error() << "; the session file is kept, try again\n";
    return 1;
  }
  if (auto removed = file.remove(); !removed) {
    err << "dugong --leave: " << removed.error() << "\n";
    return 1;
  }
  out << "peer " << config.identity.id << " left cluster " << config.zk.cluster << ": ZooKeeper session "
      << zk::detail::sessionIdText(session.sessionId)
      << (closed ? " ended, its election node is gone" : " had already expired") << "; removed "
      << config.sessionFile << "\n";
  return 0;
}

}  // namespace dugong::agent
