#include "tools/adm/config_file.h"

#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "agent/secret_file.h"

namespace dugong::adm {
namespace {

std::string text(const YAML::Node& parent, const char* key) {
  const YAML::Node n = parent[key];
  return n && n.IsScalar() ? n.as<std::string>() : std::string();
}

}  // namespace

Result<bool> applyConfigText(const std::string& yamlText, const std::string& path, CommonOptions& o) {
  YAML::Node root;
  try {
    root = YAML::Load(yamlText);
  } catch (const YAML::Exception& e) {
    return Error{path + ": not valid YAML: " + e.what()};
  }
  if (!root.IsMap()) return Error{path + ": expected a mapping with cluster and zookeeper"};
  // The cluster and its root come together: either both from the command line or both
  // from the file.
  const bool clusterFromFile = o.cluster.empty() && o.root.empty();
  if (clusterFromFile) o.cluster = text(root, "cluster");
  const YAML::Node zk = root["zookeeper"];
  if (!zk || !zk.IsMap()) return Error{path + ": no zookeeper section"};
  if (o.zk.empty()) {
    o.zk = text(zk, "connect");
    if (const std::string chroot = text(zk, "chroot"); !chroot.empty() && o.zk.find('/') == std::string::npos) {
      o.zk += chroot;
    }
  }
  if (clusterFromFile) o.root = text(zk, "root");
  const YAML::Node auth = zk["auth"];
  if (o.zkAuthFile.empty() && !o.auth && auth && auth.IsMap()) {
    const std::string user = text(auth, "user"), inlined = text(auth, "password"), file = text(auth, "passwordFile");
    if (user.empty() || (inlined.empty() == file.empty())) {
      return Error{path + ": zookeeper.auth needs user and one of password or passwordFile"};
    }
    std::string password = inlined;
    if (!file.empty()) {
      auto read = agent::readSecretFile(file);
      if (!read) return Error{path + ": zookeeper.auth.passwordFile: " + read.error()};
      password = read->secret;
    }
    o.auth = zk::DigestAuth{user, password};
  }
  return true;
}

Result<bool> applyConfigFile(const std::string& path, CommonOptions& o) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read the configuration file " + path};
  std::stringstream buf;
  buf << in.rdbuf();
  return applyConfigText(buf.str(), path, o);
}

}  // namespace dugong::adm
