#include "agent/secret_file.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace dugong::agent {

Result<SecretFile> readSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path};
  std::stringstream buf;
  buf << in.rdbuf();
  SecretFile out;
  out.secret = buf.str();
  if (!out.secret.empty() && out.secret.back() == '\n') out.secret.pop_back();
  if (!out.secret.empty() && out.secret.back() == '\r') out.secret.pop_back();
  if (out.secret.empty() || out.secret.find('\n') != std::string::npos) {
    return Error{path + " must hold the password alone, on one line"};
  }
  struct stat st {};
  out.readableByOthers = ::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0;
  return out;
}

}  // namespace dugong::agent
