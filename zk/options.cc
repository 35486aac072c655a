#include "zk/options.h"

#include <algorithm>

namespace dugong::zk {

int ZkOptions::leaseIntervalFor(int negotiatedTimeoutMs) const {
  if (leaseIntervalMs > 0) return leaseIntervalMs;
  return std::clamp(negotiatedTimeoutMs / 10, 50, 1000);
}

Result<bool> ZkOptions::validate() const {
  if (connectString.empty()) return Error{"zookeeper: connectString is empty (want host:port[,host:port...])"};
  if (connectString.find('/') != std::string::npos) {
    return Error{"zookeeper: connectString \"" + connectString + "\" holds a '/': put the chroot in `chroot`"};
  }
  if (!chroot.empty() && (chroot.front() != '/' || chroot.back() == '/')) {
    return Error{"zookeeper: chroot \"" + chroot + "\" must start with '/' and not end with one"};
  }
  if (root.empty() && cluster.empty()) return Error{"zookeeper: set the cluster name (or an explicit root)"};
  if (cluster.find('/') != std::string::npos) return Error{"zookeeper: cluster name \"" + cluster + "\" holds a '/'"};
  std::string r = effectiveRoot();
  if (r.size() < 2 || r.front() != '/' || r.back() == '/' || r.find("//") != std::string::npos) {
    return Error{"zookeeper: root \"" + r + "\" is not an absolute node path like /dugong/cluster"};
  }
  if (sessionTimeoutMs < 100 || sessionTimeoutMs > 600000) {
    return Error{"zookeeper: sessionTimeoutMs " + std::to_string(sessionTimeoutMs) + " is outside [100, 600000]"};
  }
  if (backoffInitialMs < 1 || backoffMaxMs < backoffInitialMs) {
    return Error{"zookeeper: back-off wants 1 <= backoffInitialMs <= backoffMaxMs"};
  }
  if (leaseIntervalMs < 0) return Error{"zookeeper: leaseIntervalMs must be >= 0"};
  if (unknownOutcomeTimeoutMs < 0) return Error{"zookeeper: unknownOutcomeTimeoutMs must be >= 0"};
  if (auth && (auth->user.empty() || auth->user.find(':') != std::string::npos)) {
    return Error{"zookeeper: digest auth wants a non-empty user without ':'"};
  }
  return true;
}

}  // namespace dugong::zk
