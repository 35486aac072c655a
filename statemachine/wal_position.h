// A PostgreSQL WAL position (LSN), written "X/Y" in hex as postgres does.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "statemachine/result.h"

namespace dugong {

class WalPosition {
 public:
  constexpr WalPosition() = default;
  constexpr explicit WalPosition(uint64_t value) : value_(value) {}

  // Parses "X/Y" where X and Y are 1 to 8 hex digits (any case).
  static Result<WalPosition> parse(std::string_view text);

  // Formats as "<hex>/<8 hex digits>", lower case: 0/0000000a, 1/00ff0000.
  std::string toString() const;

  constexpr uint64_t value() const { return value_; }
  constexpr WalPosition plus(uint64_t bytes) const { return WalPosition(value_ + bytes); }
  constexpr auto operator<=>(const WalPosition&) const = default;

 private:
  uint64_t value_ = 0;
};

}  // namespace dugong
