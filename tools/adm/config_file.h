// dugong-adm's configuration file: the agent's dugong.yaml, or a file with the same keys
// (cluster, zookeeper.connect, .chroot, .root, .auth.user with .auth.password or
// .auth.passwordFile), so both binaries read one credentials format. Other keys are
// ignored, so the agent's whole file serves. Command-line options and environment
// variables win over the file.
#pragma once

#include <string>

#include "statemachine/result.h"
#include "tools/adm/context.h"

namespace dugong::adm {

// Where dugong-adm looks when neither --config nor $DUGONG_CONFIG nor a ZooKeeper
// (--zk, $DUGONG_ZK) is given: the agent's file on a dugong host, when it is there.
inline constexpr const char* kDefaultConfigFile = "/etc/dugong/dugong.yaml";

// Fills what `o` does not set yet from the YAML text (read from `path`, for messages).
Result<bool> applyConfigText(const std::string& yamlText, const std::string& path, CommonOptions& o);
// The same from the file at `path`.
Result<bool> applyConfigFile(const std::string& path, CommonOptions& o);

}  // namespace dugong::adm
