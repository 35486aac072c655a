#include "tests/support/loopback_cut.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace dugong::testing {
namespace {

// iptables with `verb` ("-I" to add, "-D" to delete) for the packets from `from` to `to`.
// Its exit status (127 if it could not be run); its output goes to the test's stderr.
int dropRule(const char* verb, int from, int to) {
  const std::string sport = std::to_string(from);
  const std::string dport = std::to_string(to);
  std::vector<const char*> argv{"iptables", "-w",    "5",          verb,       "INPUT",    "-i",       "lo",
                                "-p",       "tcp",   "--sport",    sport.c_str(), "--dport", dport.c_str(), "-m",
                                "comment",  "--comment", "dugong-test-cut", "-j", "DROP", nullptr};
  const pid_t pid = ::fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    ::execvp(argv[0], const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}

}  // namespace

std::unique_ptr<LoopbackCut> LoopbackCut::make(int portA, int portB, std::string* whyNot) {
  if (::geteuid() != 0) {
    *whyNot = "not root: iptables needs it";
    return nullptr;
  }
  if (int rc = dropRule("-I", portA, portB); rc != 0) {
    *whyNot = "iptables refused a DROP rule (exit " + std::to_string(rc) + ")";
    return nullptr;
  }
  if (int rc = dropRule("-I", portB, portA); rc != 0) {
    dropRule("-D", portA, portB);
    *whyNot = "iptables refused a DROP rule (exit " + std::to_string(rc) + ")";
    return nullptr;
  }
  return std::unique_ptr<LoopbackCut>(new LoopbackCut(portA, portB));
}

LoopbackCut::~LoopbackCut() {
  dropRule("-D", portA_, portB_);
  dropRule("-D", portB_, portA_);
}

}  // namespace dugong::testing
