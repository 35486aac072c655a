#include "agent/leave_command.h"

#include "agent/instance_lock.h"
#include "agent/session_file.h"
#include "zk/c_client.h"
#include "zk/client.h"

namespace dugong::agent {

int leaveCluster(const AgentConfig& config, std::ostream& out, std::ostream& err) {
  auto lock = InstanceLock::acquire(config.instanceLockPath());
  if (!lock) {
    err << "dugong --leave: " << lock.error() << ": stop the agent first (e.g. systemctl stop dugong), then run "
        << "this again\n";
    return 1;
  }
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
