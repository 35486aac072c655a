// The cluster's key for the messages agents send each other (http.peerKeyFile,
// docs/security.md "Peer links"): every agent of a cluster holds the same key, in a file
// of its own that only its owner reads. A message carries an HMAC-SHA256 of its fields
// under the key (OpenSSL), so that an agent believes only a message made by a holder of
// the key, and a field changed on the way is seen.
#pragma once

#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::agent {

// The shortest key accepted: 32 characters (`openssl rand -hex 32` makes 64).
constexpr size_t kPeerKeyMinLength = 32;

class PeerKey {
 public:
  explicit PeerKey(std::string secret) : secret_(std::move(secret)) {}

  // The HMAC-SHA256 of `fields` under the key, in hex. Each field enters with its length,
  // so that no two lists of fields give the same input ("ab","c" differs from "a","bc").
  std::string mac(const std::vector<std::string>& fields) const;
  // Whether `macHex` is mac(fields), compared in constant time.
  bool verifies(const std::vector<std::string>& fields, const std::string& macHex) const;

 private:
  std::string secret_;
};

// The key in `path`: one line of at least kPeerKeyMinLength characters, in a file that
// neither its group nor others can read. The error says which rule the file breaks.
Result<std::string> readPeerKeyFile(const std::string& path);

// 16 bytes from OpenSSL's random generator, in hex: a message's nonce.
std::string freshNonce();

}  // namespace dugong::agent
