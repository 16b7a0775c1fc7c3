#pragma once

#include <cstdint>

namespace deepnet::model::kernels {

/// Fills keep[0..n) with 1 (probability 1 - p) or 0 (probability p) for inverted dropout.
/// Draws one 64-bit seed from LibTorch's default CPU generator, then expands it with
/// xoshiro256** (two 32-bit draws per output; keep when the draw is >= p * 2^32). The masks are
/// therefore fixed by the generator's state, which checkpoints save and restore, so a resumed
/// run draws the same masks; and drawing costs about 1 ns per element instead of one Mersenne
/// Twister call per element through the generator (uniform_).
void FillDropoutKeepMask(uint8_t* keep, int64_t n, double p);

}  // namespace deepnet::model::kernels
