// A small file of the agent's own (the kept ZooKeeper session, the sync's promise) written
// so that a crash leaves either the old text or the new one: a temporary file (mode 0600)
// written and synced, renamed over the file, and the directory synced.
#pragma once

#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

Result<bool> writeFileDurably(const std::string& path, const std::string& text);

// "<what> <path>: <strerror(errno)>".
Error fileError(const std::string& what, const std::string& path);

}  // namespace dugong::agent
