// Whether a standby's WAL receiver streams, from samples of pg_stat_wal_receiver (its
// status and its process id). A receiver that its upstream refuses at once (the WAL it
// asks for is gone there, or a timeline fork) shows 'streaming' for a few milliseconds
// before it exits, and postgres starts another every wal_retrieve_retry_interval (200 ms
// in dugong's configuration): sampled, such a standby looks streaming now and then. So a
// receiver streams only once the same process has been seen streaming for
// kSteadyStreamFor; a refused one never lives that long.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace dugong::pg {

class WalReceiverWatch {
 public:
  static constexpr std::chrono::milliseconds kSteadyStreamFor{500};

  // One sample (status and pid null when there is no receiver): whether it streams.
  bool streams(const std::optional<std::string>& status, const std::optional<std::string>& pid,
               std::chrono::steady_clock::time_point now);

 private:
  std::optional<std::string> pid_;  // the receiver last seen streaming, since since_
  std::chrono::steady_clock::time_point since_{};
};

}  // namespace dugong::pg
