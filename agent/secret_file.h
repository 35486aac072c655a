// A password kept in a file of its own (postgres.*PasswordFile, zookeeper.auth.
// passwordFile): the file holds the password alone on one line. The one format for a
// credentials file, shared by dugong and dugong-adm.
#pragma once

#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

struct SecretFile {
  std::string secret;
  bool readableByOthers = false;  // the mode lets group or others read it: worth a warning
};

// The password in `path` (a final line break dropped). Errors: unreadable, empty, or
// more than one line.
Result<SecretFile> readSecretFile(const std::string& path);

}  // namespace dugong::agent
