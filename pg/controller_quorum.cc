// Quorum commit on the primary (docs/decisions/0079-quorum-commit.md sections 3 and 5.2).
#include "pg/controller.h"

#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::pg {
using namespace std::chrono_literals;

Result<bool> PgController::reloadQuorum(const StandbyQuorum& quorum) {
  // Serialized with apply(), fence() and pollWritable(), as a fence is.
  std::lock_guard applyLock(applyMu_);
  if (auto valid = validQuorum(quorum); !valid) return Error{"quorum: " + valid.error()};
  ManagedState want;
  {
    std::lock_guard lock(stateMu_);
    want = state_;
  }
  if (want.role != "primary" || !isRunning()) return Error{"quorum: postgres does not run as a primary"};
  want.quorum = quorum;
  FenceTarget target;
  target.quorum = quorum;
  auto w = writeConf(want, FloorRead::kKeep);
  if (w) w = reload();
  if (!w) return Error{"quorum: " + w.error()};
  auto deadline = std::chrono::steady_clock::now() + std::max<std::chrono::milliseconds>(options_.queryTimeout, 10s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    auto v = verifyFence(target);
    if (v) {
      spdlog::info("pg: {}", describeFence(target));
      return true;
    }
    last = v.error();
    std::this_thread::sleep_for(20ms);
  }
  return Error{"quorum: " + renderQuorum(quorum) + " did not take effect: " + last};
}

}  // namespace dugong::pg
