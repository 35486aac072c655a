// Small helpers shared by the tests that start real servers: free loopback ports and
// scratch directories that are removed afterwards.
#pragma once

#include <string>
#include <utility>

namespace dugong::testing {

// DUGONG_CLUSTER_FIXTURES=FIXTURES: the directory where the tests of one ctest run share
// what is costly to make (set by the CMake stanzas): the ZooKeeper server
// (zk/testing/shared_zookeeper.h) and the initdb template (pg/testing/initdb_template.h).
inline constexpr const char* kClusterFixturesVariable = "DUGONG_CLUSTER_FIXTURES";

// A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's range for
// outgoing connections' local ports, and handed to no other process while this one runs
// (a lock file under $DUGONG_TEST_TMP/dugong-test-ports, default /tmp, held until exit).
int freeLoopbackPort();

// The kernel's range for the local ports of outgoing connections
// (net.ipv4.ip_local_port_range), inclusive.
std::pair<int, int> ephemeralPortRange();

// Runs `command` with /bin/sh (stdin inherited) and returns its standard output.
std::string commandOutput(const std::string& command);

// The whole content of the file at `path`; empty when it cannot be read (a log not
// written yet reads as nothing).
std::string fileText(const std::string& path);

// A self-signed certificate (RSA 2048, one day) made by Debian's openssl in `dir`
// (cert.pem, key.pem) for `subjectAltName`, e.g. "IP:127.0.0.1" or "DNS:localhost".
struct TestCertificate {
  std::string certFile;
  std::string keyFile;
};
TestCertificate makeSelfSignedCertificate(const std::string& dir, const std::string& subjectAltName);

// A fresh directory under $DUGONG_TEST_TMP (default /tmp), removed with all it holds
// when the object is destroyed, unless DUGONG_KEEP_TEST_DIRS is set. The directory is
// world-traversable so that the postgres user can reach data directories inside it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dugong::testing
