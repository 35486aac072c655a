// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL uses it: the client side of the
// exchange (without channel binding: the agent does not use TLS), and the verifier
// PostgreSQL stores for a password,
//   SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>   (base64 each)
// Passwords are used as their UTF-8 bytes. PostgreSQL first applies SASLprep, which
// leaves ASCII passwords unchanged (and a password it cannot prepare as it is); a
// non-ASCII password that NFKC normalisation would change is not supported.
#pragma once

#include <string>
#include <string_view>

#include "statemachine/result.h"

namespace dugong::pg {

std::string base64Encode(std::string_view bytes);
Result<std::string> base64Decode(std::string_view text);

// `count` random bytes from the kernel (getrandom).
std::string randomBytes(size_t count);

// The verifier of `password` with this salt and iteration count (4096 is PostgreSQL's).
std::string scramVerifier(std::string_view password, std::string_view salt, int iterations = 4096);

// One client exchange: clientFirst(), then clientFinal(server-first-message), then
// verifyServerFinal(server-final-message). PostgreSQL takes the user from the startup
// message and ignores SCRAM's, so `user` is empty there (RFC 7677's example uses one).
class ScramClient {
 public:
  ScramClient(std::string password, std::string clientNonce, std::string user = "");
  std::string clientFirst() const;  // "n,,n=<user>,r=<nonce>"
  Result<std::string> clientFinal(std::string_view serverFirst);
  Result<bool> verifyServerFinal(std::string_view serverFinal) const;

 private:
  std::string password_, nonce_, user_;
  std::string authMessage_;
  std::string serverSignature_;  // expected, raw bytes
};

}  // namespace dugong::pg
