// One agent per data directory: an exclusive lock (flock) on a file beside it, held
// for the agent's life. `dugong --leave` takes it too, so that it never closes the
// session of an agent that still runs.
#pragma once

#include <memory>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

class InstanceLock {
 public:
  // Creates the file (0600) if needed and locks it without waiting. An error names the
  // file when another process holds it.
  static Result<std::unique_ptr<InstanceLock>> acquire(const std::string& path);
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace dugong::agent
