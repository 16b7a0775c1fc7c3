#pragma once

#include <cstdint>

namespace deepnet::data {

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014; constants from Vigna's reference splitmix64.c). Used instead of <random>
/// distributions and std::shuffle, whose outputs differ between standard libraries: every
/// value here is fully specified, so a seed gives the same corpus and batch order everywhere.
/// Not thread-safe; cheap to copy.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Finalize(state_);
  }

  // Uniform in [0, n) without modulo bias (rejection sampling); 0 when n is 0.
  uint64_t UniformBelow(uint64_t n) {
    if (n == 0) return 0;
    // 2^64 mod n: values below it would make the low residues more likely.
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t x = Next();
      if (x >= threshold) return x % n;
    }
  }

  // The SplitMix64 output function, a bijective 64-bit mixer.
  static uint64_t Finalize(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Derives an independent seed from two values, e.g. (seed, epoch).
  static uint64_t MixSeeds(uint64_t a, uint64_t b) {
    return Finalize(a ^ Finalize(b + 0x9e3779b97f4a7c15ULL));
  }

 private:
  uint64_t state_;
};

}  // namespace deepnet::data
