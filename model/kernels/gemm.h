#pragma once

#include <cstdint>

namespace deepnet::model::kernels {

/// Row-major single-precision matrix product on raw CPU memory:
/// C[m, n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T. `lda`, `ldb`, `ldc` are row
/// strides in elements; with beta == 0, C is only written (it may hold garbage before).
/// Calls CBLAS directly when the build found it (DEEPNET_HAVE_CBLAS), else ATen's mm on views.
/// The fused kernels call this once per (batch, head) matrix: through ATen's bmm, each such
/// matrix costs several dispatched ops (select, as_strided, resolve_conj) besides the product.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

/// The same through ATen (addmm_out on strided views), always compiled: the fallback when no
/// CBLAS was found, and the comparison in tests.
void GemmAten(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc);

/// True when Gemm calls CBLAS.
bool GemmUsesCblas();

}  // namespace deepnet::model::kernels
