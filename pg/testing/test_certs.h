// Certificates for tests, made with Debian's openssl command: a CA, and a certificate
// and key it signed for 127.0.0.1 and localhost (server and client use). The keys are
// owned by `owner` (the postgres OS user) with mode 0600, as postgres and libpq require;
// the certificates are readable by everyone.
#pragma once

#include <string>

#include "statemachine/result.h"

namespace dugong::pg::testing {

struct TestCerts {
  std::string caFile;    // the CA's certificate
  std::string certFile;  // signed by the CA: CN and subjectAltName 127.0.0.1, localhost
  std::string keyFile;
};

// Makes them in `dir` (created; it must be reachable by `owner`), file names prefixed
// with `name`. Each call makes a new CA.
Result<TestCerts> makeTestCerts(const std::string& dir, const std::string& name, const std::string& owner);

}  // namespace dugong::pg::testing
