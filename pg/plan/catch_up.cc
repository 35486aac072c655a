#include "pg/plan/catch_up.h"

#include <algorithm>
#include <functional>

namespace dugong::pg {

std::optional<uint64_t> kthLatestFlush(std::vector<uint64_t> flushes, int k) {
  if (k < 1 || flushes.size() < static_cast<size_t>(k)) return std::nullopt;
  std::nth_element(flushes.begin(), flushes.begin() + (k - 1), flushes.end(), std::greater<>());
  return flushes[static_cast<size_t>(k - 1)];
}

CatchUp planCatchUp(std::optional<uint64_t> target, const QuorumSeen& seen) {
  CatchUp out;
  out.target = target;
  const std::optional<uint64_t> flushed = kthLatestFlush(seen.memberFlushes, seen.k);
  if (!flushed) return out;
  if (!out.target) {
    out.target = seen.primaryAt;
    out.targetSet = true;
  }
  out.writable = *flushed >= *out.target;
  return out;
}

CatchUp planCatchUp(std::optional<uint64_t> target, const std::optional<SyncSeen>& seen) {
  if (!seen) return planCatchUp(target, QuorumSeen{});
  return planCatchUp(target, QuorumSeen{seen->primaryAt, 1, {seen->syncFlush}});
}

}  // namespace dugong::pg
