// A simulated postgres WAL: the sequence of commit records a postgres holds (both
// simulators' postgres, sim/world/sim_postgres.h).
//
// Each record carries a chain hash over the whole history up to it, so two WALs agree on
// their common prefix iff their chain hashes at the end of that prefix are equal. That
// makes "is this commit in that history" and "have these two diverged" O(1).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "statemachine/timeline_history.h"
#include "statemachine/wal_position.h"

namespace dugong::simworld {

// Where one commit record sits in a history.
struct WalMark {
  uint64_t index = 0;     // position in the WAL, from 0
  uint64_t chain = 0;     // chain hash of the history up to and including the record
  uint64_t commitId = 0;  // the client's id for the commit
};

class Wal {
 public:
  // Bytes per record in the WAL positions the peers read ("X/Y"), by default.
  static constexpr uint64_t kRecordBytes = 0x80;

  explicit Wal(uint64_t recordBytes = kRecordBytes) : recordBytes_(recordBytes) {}

  size_t size() const { return chain_.size(); }
  WalPosition position() const { return WalPosition(size() * recordBytes_); }
  uint64_t recordBytes() const { return recordBytes_; }

  WalMark append(uint64_t commitId) {
    uint64_t prev = chain_.empty() ? 0 : chain_.back();
    chain_.push_back(mix(prev, commitId));
    ids_.push_back(commitId);
    timelines_.push_back(timeline_);
    return mark(size() - 1);
  }

  // Postgres timelines: each record is written on the timeline its writer was on; a
  // promotion moves on to a new one (`timeline`, unique in a world: see
  // PgFleet::newTimeline), and a standby that has received everything its upstream
  // has is on the upstream's.
  int64_t timeline() const { return timeline_; }
  void promote(int64_t timeline) { timeline_ = timeline; }
  // As the adapter reads it (postgres's timeline history): the timelines of the
  // records, each ending where the next began, and the one it is on now.
  TimelineHistory history() const {
    TimelineHistory h;
    h.timeline = timeline_;
    for (size_t i = 0; i < timelines_.size(); ++i) {
      const bool runEnds = i + 1 == timelines_.size() || timelines_[i + 1] != timelines_[i];
      if (runEnds && timelines_[i] != timeline_) {
        h.ancestors.push_back({timelines_[i], WalPosition((i + 1) * recordBytes_)});
      }
    }
    return h;
  }

  // history().timelineAt(p), without building the history: the timeline of the byte
  // before `p` (the current one past the end).
  int64_t timelineAt(WalPosition p) const {
    if (p.value() == 0) return 0;
    const uint64_t record = (p.value() - 1) / recordBytes_;
    return record < timelines_.size() ? timelines_[record] : timeline_;
  }

  // REQUIRES: i < size().
  WalMark mark(size_t i) const { return {i, chain_[i], ids_[i]}; }

  // True if this history holds the record `m` at its place.
  bool contains(const WalMark& m) const { return m.index < chain_.size() && chain_[m.index] == m.chain; }

  // True if neither history is a prefix of the other: they hold different records at
  // the same place, and this one cannot stream from `other` until it is rebuilt.
  bool divergedFrom(const Wal& other) const {
    size_t n = std::min(size(), other.size());
    return n > 0 && chain_[n - 1] != other.chain_[n - 1];
  }

  // How many records this history shares with `other` from the start (agreement at a
  // place implies agreement everywhere before it, so a binary search finds the fork).
  size_t commonPrefix(const Wal& other) const {
    size_t lo = 0, hi = std::min(size(), other.size());
    while (lo < hi) {
      size_t mid = lo + (hi - lo + 1) / 2;
      if (chain_[mid - 1] == other.chain_[mid - 1]) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  // pg_rewind from `source`: everything after the fork is discarded (this history then
  // streams the rest). Returns how many records were discarded.
  size_t rewindTo(const Wal& source) {
    size_t keep = commonPrefix(source);
    size_t discarded = size() - keep;
    chain_.resize(keep);
    ids_.resize(keep);
    timelines_.resize(keep);
    timeline_ = keep > 0 ? timelines_.back() : 1;  // it follows the source from there
    return discarded;
  }

  // Keeps the first `n` records only (no effect if it holds fewer).
  void truncate(size_t n) {
    if (n >= size()) return;
    chain_.resize(n);
    ids_.resize(n);
    timelines_.resize(n);
  }

  // Receives up to `max` records that `upstream` has beyond this history.
  // REQUIRES: !divergedFrom(upstream). Returns how many were copied.
  size_t copyFrom(const Wal& upstream, size_t max) {
    const size_t from = size();
    const size_t copied = std::min(max, upstream.size() - std::min(from, upstream.size()));
    const auto first = static_cast<std::ptrdiff_t>(from);
    const auto last = static_cast<std::ptrdiff_t>(from + copied);
    chain_.insert(chain_.end(), upstream.chain_.begin() + first, upstream.chain_.begin() + last);
    ids_.insert(ids_.end(), upstream.ids_.begin() + first, upstream.ids_.begin() + last);
    timelines_.insert(timelines_.end(), upstream.timelines_.begin() + first, upstream.timelines_.begin() + last);
    if (size() == upstream.size()) {
      timeline_ = upstream.timeline_;
    } else if (copied > 0) {
      timeline_ = timelines_.back();
    }
    return copied;
  }

 private:
  static uint64_t mix(uint64_t prev, uint64_t id) {
    uint64_t z = prev ^ (id + 0x9e3779b97f4a7c15ULL + (prev << 6) + (prev >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t recordBytes_;
  std::vector<uint64_t> ids_;
  std::vector<uint64_t> chain_;
  std::vector<int64_t> timelines_;  // of each record
  int64_t timeline_ = 1;            // initdb's
};

}  // namespace dugong::simworld
