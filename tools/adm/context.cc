#include "tools/adm/context.h"

#include <pwd.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

namespace dugong::adm {

int fail(int code, const std::string& message) {
  std::cerr << "dugong-adm: " << message << "\n";
  return code;
}

Result<zk::ZkOptions> zkOptionsFrom(const CommonOptions& o) {
  if (o.zk.empty()) {
    return Error{"no ZooKeeper given: use -z HOST:PORT[,HOST:PORT...], set DUGONG_ZK, or name a dugong.yaml with "
                 "--config"};
  }
  if (o.cluster.empty() && o.root.empty()) {
    return Error{"no cluster given: use -c NAME (or --root PATH) or set DUGONG_CLUSTER"};
  }
  if (o.timeoutSeconds < 1 || o.timeoutSeconds > 600) return Error{"--timeout must be from 1 to 600 seconds"};
  zk::ZkOptions z;
  z.connectString = o.zk;
  if (auto slash = o.zk.find('/'); slash != std::string::npos) {
    z.connectString = o.zk.substr(0, slash);
    z.chroot = o.zk.substr(slash);
  }
  z.cluster = o.cluster;
  z.root = o.root;
  z.sessionTimeoutMs = std::max(4000, o.timeoutSeconds * 1000);
  if (!o.zkAuthFile.empty()) {
    std::ifstream in(o.zkAuthFile);
    std::string line;
    if (!in || !std::getline(in, line)) return Error{"--zk-auth-file " + o.zkAuthFile + ": cannot read it"};
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == line.size()) {
      return Error{"--zk-auth-file " + o.zkAuthFile + ": the first line must be user:password"};
    }
    z.auth = zk::DigestAuth{line.substr(0, colon), line.substr(colon + 1)};
  } else if (o.auth) {
    z.auth = o.auth;
  }
  if (auto v = z.validate(); !v) return Error{v.error()};
  return z;
}

std::string whyActiveNow(zk::Client& client, const CommonOptions& common, const std::string& id) {
  auto view = fetchView(client, common.cluster, /*agents=*/true, std::chrono::seconds(2));
  const PeerView* p = view ? view->find(id) : nullptr;
  if (!view) return "its agent may run: " + view.error();
  return p ? whyActive(*p) : "its agent may run: it is not in the cluster's view";
}

std::string operatorReason(const std::string& what) {
  // The user the system says runs the command ($USER is unset under cron and runuser, and
  // anyone can set it), and the one sudo ran it for.
  const uid_t uid = ::getuid();
  const passwd* pw = ::getpwuid(uid);
  std::string user = pw ? pw->pw_name : "uid " + std::to_string(uid);
  const char* sudoUser = std::getenv("SUDO_USER");
  if (sudoUser && *sudoUser && user != sudoUser) user += " (sudo from " + std::string(sudoUser) + ")";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return "dugong-adm " + what + " (by " + user + "@" + host + ")";
}

}  // namespace dugong::adm
