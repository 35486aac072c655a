#include "pg/testing/test_certs.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pg/command.h"

namespace dugong::pg::testing {
namespace {

Result<bool> openssl(std::vector<std::string> args) {
  CommandSpec spec;
  spec.argv = {"/usr/bin/openssl"};
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.timeout = std::chrono::seconds(30);
  auto r = runCommand(spec);
  if (!r.ok()) return Error{"openssl " + spec.argv.at(1) + ": " + r.describe() + ": " + r.output};
  return true;
}

}  // namespace

Result<TestCerts> makeTestCerts(const std::string& dir, const std::string& name, const std::string& owner) {
  std::filesystem::create_directories(dir);
  ::chmod(dir.c_str(), 0755);
  const std::string base = dir + "/" + name;
  const std::string caKey = base + "-ca.key", csr = base + ".csr", ext = base + ".ext";
  TestCerts out{base + "-ca.crt", base + ".crt", base + ".key"};
  const std::vector<std::string> ecKey = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  if (auto r = openssl(with({"req", "-x509", "-days", "2", "-subj", "/CN=dugong test CA " + name, "-keyout", caKey,
                             "-out", out.caFile},
                            ecKey));
      !r) {
    return Error{r.error()};
  }
  if (auto r = openssl(with({"req", "-subj", "/CN=127.0.0.1", "-keyout", out.keyFile, "-out", csr}, ecKey)); !r) {
    return Error{r.error()};
  }
  std::ofstream(ext) << "subjectAltName = IP:127.0.0.1, DNS:localhost\n";
  if (auto r = openssl({"x509", "-req", "-days", "2", "-in", csr, "-CA", out.caFile, "-CAkey", caKey,
                        "-CAcreateserial", "-extfile", ext, "-out", out.certFile});
      !r) {
    return Error{r.error()};
  }
  const passwd* pw = ::getpwnam(owner.c_str());
  if (!pw || ::chown(out.keyFile.c_str(), pw->pw_uid, pw->pw_gid) != 0) return Error{"cannot give the key to " + owner};
  ::chmod(out.keyFile.c_str(), 0600);
  ::chmod(out.certFile.c_str(), 0644);
  ::chmod(out.caFile.c_str(), 0644);
  return out;
}

}  // namespace dugong::pg::testing
