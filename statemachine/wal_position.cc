#include "statemachine/wal_position.h"

#include <cstdio>

namespace dugong {
namespace {

bool parseHexWord(std::string_view text, uint32_t* out) {
  if (text.empty() || text.size() > 8) return false;
  uint32_t v = 0;
  for (char c : text) {
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    v = (v << 4) | d;
  }
  *out = v;
  return true;
}

}  // namespace

Result<WalPosition> WalPosition::parse(std::string_view text) {
  auto slash = text.find('/');
  uint32_t hi = 0;
  uint32_t lo = 0;
  if (slash == std::string_view::npos || !parseHexWord(text.substr(0, slash), &hi) ||
      !parseHexWord(text.substr(slash + 1), &lo)) {
    return Error{"invalid WAL position \"" + std::string(text) +
                 "\": expected two hex numbers of at most 8 digits separated by '/', like 0/16B3748"};
  }
  return WalPosition((static_cast<uint64_t>(hi) << 32) | lo);
}

std::string WalPosition::toString() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%x/%08x", static_cast<unsigned>(value_ >> 32),
                static_cast<unsigned>(value_ & 0xffffffffu));
  return buf;
}

}  // namespace dugong
