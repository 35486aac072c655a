// The one source of randomness of a simulation run. SplitMix64: small, fast, and the
// same sequence on every platform (std:: distributions are implementation-defined, so
// they are not used: a seed must replay exactly anywhere).
#pragma once

#include <cstdint>

namespace dugong::simworld {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [lo, hi], both inclusive. REQUIRES: lo <= hi.
  int64_t between(int64_t lo, int64_t hi) {
    auto span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(next() % span);
  }

  // True with probability `permille`/1000.
  bool chance(int permille) { return between(0, 999) < permille; }

  // An independent stream for another purpose, so that one purpose drawing more or
  // fewer numbers does not shift the others.
  Rng fork(uint64_t salt) { return Rng(next() ^ (salt * 0xd1b54a32d192ed03ULL)); }

 private:
  uint64_t state_;
};

}  // namespace dugong::simworld
