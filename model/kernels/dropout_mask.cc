#include "model/kernels/dropout_mask.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace deepnet::model::kernels {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// xoshiro256** (Blackman and Vigna), seeded through SplitMix64 as its authors recommend.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& word : s_) word = SplitMix64(seed);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  uint64_t s_[4];
};

uint64_t DrawSeed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

}  // namespace

void FillDropoutKeepMask(uint8_t* keep, int64_t n, double p) {
  if (n <= 0) return;
  Xoshiro256 rng(DrawSeed());
  // Keep when a uniform 32-bit draw u satisfies u >= p * 2^32, i.e. with probability 1 - p
  // (to 2^-32). p >= 1 drops everything; p <= 0 keeps everything.
  const double scaled = p * 4294967296.0;
  const uint64_t threshold =
      p <= 0.0 ? 0 : (p >= 1.0 ? (uint64_t{1} << 32) : static_cast<uint64_t>(scaled));
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t r = rng.Next();
    keep[i] = static_cast<uint8_t>((r & 0xffffffffULL) >= threshold);
    keep[i + 1] = static_cast<uint8_t>((r >> 32) >= threshold);
  }
  if (i < n) keep[i] = static_cast<uint8_t>((rng.Next() & 0xffffffffULL) >= threshold);
}

}  // namespace deepnet::model::kernels
