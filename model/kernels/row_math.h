#pragma once

#include <cstdint>

// Row passes marked with this are compiled twice, for AVX2 and for the x86-64 baseline (SSE2),
// and the loader picks one for the CPU (GCC function multiversioning). Only AVX2 is enabled,
// not FMA, so no multiply-add is contracted: both versions do the same float operations in the
// same order (the eight partial sums below become the lanes of one vector either way).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define DEEPNET_ROW_PASS __attribute__((target_clones("avx2", "default")))
#else
#define DEEPNET_ROW_PASS
#endif

namespace deepnet::model::kernels {

// Reductions over one row with eight independent partial sums. Without -ffast-math the
// compiler keeps a single running float sum in order, one dependent add per element (about
// four cycles each); independent partial sums vectorise and pipeline. The summation order is
// fixed, so results are deterministic.
inline float RowSum(const float* x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += x[j + k];
  }
  for (; j < n; ++j) acc[0] += x[j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline float RowDot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[j + k] * b[j + k];
  }
  for (; j < n; ++j) acc[0] += a[j] * b[j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Sum of (x - center)^2.
inline float RowCenteredSquares(const float* x, float center, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const float c = x[j + k] - center;
      acc[k] += c * c;
    }
  }
  for (; j < n; ++j) acc[0] += (x[j] - center) * (x[j] - center);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// out = in * keep * scale for a 0/1 dropout mask, without a branch per element (a select on
// the mask compiled to a scalar loop); as in ATen's dropout, a dropped inf or NaN stays NaN.
inline void ApplyKeepMask(float* out, const float* in, const uint8_t* keep, float scale,
                          int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = in[j] * (static_cast<float>(keep[j]) * scale);
}

}  // namespace deepnet::model::kernels
