#include "pg/replication_slots.h"

#include <cstdio>
#include <functional>

#include "pg/sql.h"

namespace dugong::pg {

namespace {
const char kPrefix[] = "dugong_";
}

std::string slotNameFor(const std::string& peerId) {
  std::string mapped;
  bool changed = false;
  for (char c : peerId) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      mapped += c;
    } else if (c >= 'A' && c <= 'Z') {
      mapped += static_cast<char>(c - 'A' + 'a');
      changed = true;
    } else {
      mapped += '_';
      changed = true;
    }
  }
  std::string name = kPrefix + mapped;
  if (!changed && name.size() <= 63) return name;
  // FNV-1a: stable across builds and platforms (std::hash is not).
  uint32_t h = 2166136261u;
  for (char c : peerId) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return name.substr(0, 63 - 9) + "_" + hex;
}

bool isDugongSlot(const std::string& slotName) { return slotName.rfind(kPrefix, 0) == 0; }

Result<SlotEnsured> ensureSlot(const std::string& replicationConninfo, const std::string& slotName,
                               std::chrono::milliseconds timeout) {
  SlotEnsured out;
  auto read = runQuery(replicationConninfo, "READ_REPLICATION_SLOT " + quoteIdent(slotName), timeout);
  if (!read) return Error{"reading replication slot " + slotName + ": " + read.error()};
  bool exists = !read->rows.empty() && read->rows[0].size() >= 2 && read->rows[0][0].has_value();
  if (exists && read->rows[0][1].has_value()) return out;  // holds WAL from restart_lsn on
  if (exists) {
    // Invalidated: it kept more than max_slot_wal_keep_size and lost its WAL.
    auto d = dropSlot(replicationConninfo, slotName, timeout);
    if (!d) return Error{d.error()};
    out.recreated = true;
  }
  auto c = runQuery(replicationConninfo, "CREATE_REPLICATION_SLOT " + quoteIdent(slotName) + " PHYSICAL RESERVE_WAL",
                    timeout);
  if (!c && c.error().find("already exists") == std::string::npos) {
    return Error{"creating replication slot " + slotName + ": " + c.error()};
  }
  out.created = c.ok();
  return out;
}

Result<bool> dropSlot(const std::string& replicationConninfo, const std::string& slotName,
                      std::chrono::milliseconds timeout) {
  auto d = runQuery(replicationConninfo, "DROP_REPLICATION_SLOT " + quoteIdent(slotName), timeout);
  if (!d && d.error().find("does not exist") == std::string::npos) {
    return Error{"dropping replication slot " + slotName + ": " + d.error()};
  }
  return true;
}

}  // namespace dugong::pg
