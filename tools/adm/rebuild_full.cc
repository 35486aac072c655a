#include "tools/adm/rebuild_full.h"

#include <filesystem>

namespace dugong::adm {
namespace fs = std::filesystem;

std::string setAsidePath(const std::string& dataDir) { return dataDir + ".before-full-rebuild"; }

bool removeAfterCopy(const OldDataDir& old, const std::string& copySystemId, bool discardData, std::string* why) {
  if (discardData || !old.setUp) return true;
  if (!old.standby) {
    *why = "it last ran as a primary: it may hold WAL that no other peer has";
  } else if (old.systemId.empty() || copySystemId.empty()) {
    *why = "its database system could not be compared with the copy's";
  } else if (old.systemId != copySystemId) {
    *why = "it held another database system (" + old.systemId + ", the copy is of " + copySystemId + ")";
  } else {
    return true;
  }
  return false;
}

Result<bool> moveAside(const std::string& dataDir) {
  const std::string aside = setAsidePath(dataDir);
  std::error_code ec;
  if (fs::exists(aside, ec) || ec) {
    return Error{aside + " exists already (left by an earlier rebuild --full): remove it, or put it back in place "
                         "of " + dataDir + ", then run rebuild --full again; nothing was changed"};
  }
  if (!fs::exists(dataDir, ec)) return false;  // nothing to move
  fs::rename(dataDir, aside, ec);
  if (ec) return Error{"cannot move " + dataDir + " aside to " + aside + ": " + ec.message() + "; nothing was changed"};
  return true;
}

std::string incompleteMarkerPath(const std::string& dataDir) { return dataDir + ".dugong-incomplete"; }

Result<bool> putBack(const std::string& dataDir, bool markerBefore) {
  const std::string aside = setAsidePath(dataDir);
  std::error_code ec;
  if (!fs::exists(aside, ec)) return false;
  fs::remove_all(dataDir, ec);
  if (ec) return Error{"cannot remove the failed copy " + dataDir + ": " + ec.message() + "; the old data directory "
                       "is at " + aside};
  fs::rename(aside, dataDir, ec);
  if (ec) return Error{"cannot put " + aside + " back to " + dataDir + ": " + ec.message()};
  if (!markerBefore) fs::remove(incompleteMarkerPath(dataDir), ec);
  if (ec) {
    return Error{"put " + dataDir + " back, but cannot remove " + incompleteMarkerPath(dataDir) + ": " + ec.message()};
  }
  return true;
}

Result<bool> removeSetAside(const std::string& dataDir) {
  const std::string aside = setAsidePath(dataDir);
  std::error_code ec;
  fs::remove_all(aside, ec);
  if (ec) return Error{"cannot remove " + aside + ": " + ec.message()};
  return true;
}

}  // namespace dugong::adm
