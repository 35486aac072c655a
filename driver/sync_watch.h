// The driver's watches of replication (driver/sync_watch.cc, which alone changes them):
// on a primary, whether its sync acknowledges commits, or in quorum mode whether each
// member does (driver/sync_ack_watch.h decides);
// on a standby, whether its postgres streams, as published for the choice of a new sync.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "driver/sync_ack_watch.h"

namespace dugong::driver {

class Core;

class SyncWatch {
 public:
  SyncWatch(int64_t replaceAfterMs, int64_t connectGraceMs)
      : ack_(replaceAfterMs, connectGraceMs), replaceAfterMs_(replaceAfterMs), connectGraceMs_(connectGraceMs) {}

 private:
  friend class Core;  // sync_watch.cc
  SyncAckWatch ack_;
  std::optional<std::pair<int64_t, std::string>> watchedFor_;  // generation, sync
  // Quorum mode: the members watched (generation, ids) and each one's verdict.
  std::optional<std::pair<int64_t, std::vector<std::string>>> membersFor_;
  std::map<std::string, SyncAckWatch> members_;
  bool sampleInFlight_ = false;
  // The upstream postgres was last seen streaming from in its current run ("": none since
  // it last ran), and what was last published.
  std::string streamedFrom_;
  std::optional<bool> publishedStreaming_;
  int64_t replaceAfterMs_, connectGraceMs_;  // each member's watch's
};

}  // namespace dugong::driver
