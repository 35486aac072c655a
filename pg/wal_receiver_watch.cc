#include "pg/wal_receiver_watch.h"

namespace dugong::pg {

bool WalReceiverWatch::streams(const std::optional<std::string>& status, const std::optional<std::string>& pid,
                               std::chrono::steady_clock::time_point now) {
  if (status != "streaming" || !pid) {
    pid_.reset();
    return false;
  }
  if (pid_ != pid) {
    pid_ = pid;
    since_ = now;
  }
  return now - since_ >= kSteadyStreamFor;
}

}  // namespace dugong::pg
