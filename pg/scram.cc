#include "pg/scram.h"

#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <cstring>
#include <stdexcept>

#include "pg/sha256.h"

namespace dugong::pg {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The value of attribute `name` ("r", "s", "i", "v", "e") in a comma-separated message.
std::optional<std::string_view> attribute(std::string_view message, char name) {
  while (!message.empty()) {
    auto comma = message.find(',');
    std::string_view part = message.substr(0, comma);
    if (part.size() >= 2 && part[0] == name && part[1] == '=') return part.substr(2);
    if (comma == std::string_view::npos) break;
    message.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

std::string xorBytes(std::string_view a, std::string_view b) {
  std::string out(a);
  for (size_t i = 0; i < out.size() && i < b.size(); ++i) out[i] = static_cast<char>(out[i] ^ b[i]);
  return out;
}

// SCRAM's "saslname": ',' and '=' escaped.
std::string saslName(std::string_view user) {
  std::string out;
  for (char c : user) {
    if (c == ',') {
      out += "=2C";
    } else if (c == '=') {
      out += "=3D";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = uint32_t{static_cast<uint8_t>(bytes[i])} << 16 | uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8 |
                 static_cast<uint8_t>(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (size_t left = bytes.size() - i; left > 0) {
    uint32_t v = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (left == 2) v |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Error{"base64: length " + std::to_string(text.size()) + " is not a multiple of 4"};
  std::string out;
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      const char* at = c == '\0' ? nullptr : std::strchr(kAlphabet, c);
      if (c == '=' && i + 4 == text.size() && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
      } else if (at && pad == 0) {
        v = v << 6 | static_cast<uint32_t>(at - kAlphabet);
      } else {
        return Error{"base64: bad character at " + std::to_string(i + k)};
      }
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

std::string randomBytes(size_t count) {
  std::string out(count, '\0');
  size_t done = 0;
  while (done < count) {
    ssize_t n = ::getrandom(out.data() + done, count - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return out;
}

std::string scramVerifier(std::string_view password, std::string_view salt, int iterations) {
  const auto salted = pbkdf2Sha256(password, salt, iterations);
  const auto storedKey = sha256(view(hmacSha256(view(salted), "Client Key")));
  const auto serverKey = hmacSha256(view(salted), "Server Key");
  return "SCRAM-SHA-256$" + std::to_string(iterations) + ":" + base64Encode(salt) + "$" +
         base64Encode(view(storedKey)) + ":" + base64Encode(view(serverKey));
}

ScramClient::ScramClient(std::string password, std::string clientNonce, std::string user)
    : password_(std::move(password)), nonce_(std::move(clientNonce)), user_(std::move(user)) {}

std::string ScramClient::clientFirst() const { return "n,,n=" + saslName(user_) + ",r=" + nonce_; }

Result<std::string> ScramClient::clientFinal(std::string_view serverFirst) {
  auto nonce = attribute(serverFirst, 'r');
  auto salt64 = attribute(serverFirst, 's');
  auto iter = attribute(serverFirst, 'i');
  if (!nonce || !salt64 || !iter) return Error{"SCRAM: malformed server-first-message"};
  if (nonce->size() <= nonce_.size() || nonce->substr(0, nonce_.size()) != nonce_) {
    return Error{"SCRAM: the server's nonce does not extend ours"};
  }
  auto salt = base64Decode(*salt64);
  if (!salt || salt->empty()) return Error{"SCRAM: bad salt"};
  int iterations = 0;
  auto [p, ec] = std::from_chars(iter->data(), iter->data() + iter->size(), iterations);
  if (ec != std::errc() || p != iter->data() + iter->size() || iterations < 1) {
    return Error{"SCRAM: bad iteration count"};
  }
  const auto salted = pbkdf2Sha256(password_, salt.value(), iterations);
  const auto clientKey = hmacSha256(view(salted), "Client Key");
  const auto storedKey = sha256(view(clientKey));
  const std::string withoutProof = "c=" + base64Encode("n,,") + ",r=" + std::string(*nonce);
  authMessage_ = clientFirst().substr(3) + "," + std::string(serverFirst) + "," + withoutProof;
  const auto clientSignature = hmacSha256(view(storedKey), authMessage_);
  const auto serverKey = hmacSha256(view(salted), "Server Key");
  serverSignature_ = std::string(view(hmacSha256(view(serverKey), authMessage_)));
  return withoutProof + ",p=" + base64Encode(xorBytes(view(clientKey), view(clientSignature)));
}

Result<bool> ScramClient::verifyServerFinal(std::string_view serverFinal) const {
  if (auto e = attribute(serverFinal, 'e')) return Error{"SCRAM: the server refused: " + std::string(*e)};
  auto v = attribute(serverFinal, 'v');
  if (!v) return Error{"SCRAM: malformed server-final-message"};
  auto signature = base64Decode(*v);
  if (!signature || signature.value() != serverSignature_ || serverSignature_.empty()) {
    return Error{"SCRAM: the server's signature is wrong (not the server that knows the password)"};
  }
  return true;
}

}  // namespace dugong::pg
