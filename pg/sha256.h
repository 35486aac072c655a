// SHA-256 (FIPS 180-4), HMAC-SHA-256 (RFC 2104) and PBKDF2-HMAC-SHA-256 (RFC 8018), the
// primitives of SCRAM-SHA-256 (pg/scram.h). Small and dependency-free, so that the agent
// needs no TLS library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dugong::pg {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  void update(const uint8_t* data, size_t size);
  Sha256Digest finish();  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

Sha256Digest sha256(std::string_view data);
Sha256Digest hmacSha256(std::string_view key, std::string_view data);
// PBKDF2 with HMAC-SHA-256 and one 32-byte block: SCRAM's Hi(password, salt, i).
Sha256Digest pbkdf2Sha256(std::string_view password, std::string_view salt, int iterations);

inline std::string_view view(const Sha256Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

}  // namespace dugong::pg
