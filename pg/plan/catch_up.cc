#include "pg/plan/catch_up.h"

namespace dugong::pg {

CatchUp planCatchUp(std::optional<uint64_t> target, const std::optional<SyncSeen>& seen) {
  CatchUp out;
  out.target = target;
  if (!seen) return out;
  if (!out.target) {
    out.target = seen->primaryAt;
    out.targetSet = true;
  }
  out.writable = seen->syncFlush >= *out.target;
  return out;
}

}  // namespace dugong::pg
