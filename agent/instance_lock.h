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
  // Creates the file (0644: it holds nothing, and dugong-adm may run as the postgres
  // user) if needed and locks it without waiting. When another process holds it, the
  // error starts with kHeldByAnother.
  static Result<std::unique_ptr<InstanceLock>> acquire(const std::string& path);
  static constexpr const char* kHeldByAnother = "another dugong agent runs for this data directory";
  static bool heldByAnother(const std::string& error) { return error.rfind(kHeldByAnother, 0) == 0; }
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace dugong::agent
