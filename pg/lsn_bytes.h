// A WAL position as postgres prints it ("0/3000060"), as a byte count; nullopt when absent
// or unreadable. For the status documents and gauges that compute lags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "statemachine/wal_position.h"

namespace dugong::pg {

inline std::optional<uint64_t> lsnBytes(const std::optional<std::string>& lsn) {
  if (!lsn) return std::nullopt;
  auto w = WalPosition::parse(*lsn);
  if (!w) return std::nullopt;
  return w->value();
}

}  // namespace dugong::pg
