#include "agent/peer_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "agent/secret_file.h"

namespace dugong::agent {
namespace {

std::string hex(const unsigned char* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string PeerKey::mac(const std::vector<std::string>& fields) const {
  std::string input;
  for (const auto& f : fields) input += std::to_string(f.size()) + ":" + f + ";";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest, &length) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed in OpenSSL");
  }
  return hex(digest, length);
}

bool PeerKey::verifies(const std::vector<std::string>& fields, const std::string& macHex) const {
  const std::string expected = mac(fields);
  return macHex.size() == expected.size() && CRYPTO_memcmp(macHex.data(), expected.data(), expected.size()) == 0;
}

Result<std::string> readPeerKeyFile(const std::string& path) {
  auto read = readSecretFile(path);
  if (!read) return Error{read.error()};
  if (read->readableByOthers) {
    return Error{path + " can be read by other users than its owner: chmod 600 it (the key lets its holder speak "
                        "for any agent of the cluster)"};
  }
  if (read->secret.size() < kPeerKeyMinLength) {
    return Error{path + " holds a key of " + std::to_string(read->secret.size()) + " characters, fewer than " +
                 std::to_string(kPeerKeyMinLength) + ": make one with `openssl rand -hex 32`"};
  }
  return read->secret;
}

std::string freshNonce() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed in OpenSSL");
  return hex(bytes, sizeof bytes);
}

}  // namespace dugong::agent
