// A network namespace of a test's own (`ip netns add`): only loopback, up; deleted with
// the object. A process started in it (setns on fd()) sees its own 127.0.0.1, which no
// process outside reaches: everything it exchanges with the rest of the test passes
// through relays the test makes with listenOnLoopback/connectToLoopback, on either side.
// Needs root (CAP_SYS_ADMIN) and iproute2.
#pragma once

#include <memory>
#include <string>

namespace dugong::testing {

class NetNamespace {
 public:
  // A namespace named `prefix` and this process' id; nullptr (and `whyNot` says why) when
  // none can be made here: not root, no `ip`, namespaces not permitted. Namespaces of
  // the same prefix left by a killed run (its process gone, nothing in them) are
  // deleted first.
  static std::unique_ptr<NetNamespace> make(const std::string& prefix, std::string* whyNot);
  ~NetNamespace();
  NetNamespace(const NetNamespace&) = delete;
  NetNamespace& operator=(const NetNamespace&) = delete;

  const std::string& name() const { return name_; }
  // Open on /var/run/netns/<name>, for setns(fd, CLONE_NEWNET) in a child before exec.
  int fd() const { return fd_; }
  // A TCP socket inside, listening on 127.0.0.1:port (0: any port); throws
  // std::runtime_error. The socket stays in this namespace whoever uses it.
  int listenOnLoopback(int port) const;
  // A TCP connection from inside to 127.0.0.1:port inside; -1 when it fails.
  int connectToLoopback(int port) const;

 private:
  NetNamespace(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  std::string name_;
  int fd_ = -1;
};

// The same in the calling thread's own namespace (the test's).
int listenOnLoopback(int port);
int connectToLoopback(int port);

}  // namespace dugong::testing
