#include "model/kernels/gemm.h"

#include <ATen/ATen.h>

#ifdef DEEPNET_HAVE_CBLAS
#include <cblas.h>
#endif

namespace deepnet::model::kernels {
namespace {

// A row-major [rows, cols] matrix at `p` with row stride `ld`, as a tensor view (no copy).
at::Tensor View(const float* p, int64_t rows, int64_t cols, int64_t ld, bool transpose) {
  at::Tensor t = at::from_blob(const_cast<float*>(p), {rows, cols}, {ld, 1},
                               at::TensorOptions().dtype(at::kFloat));
  return transpose ? t.t() : t;
}

}  // namespace

void GemmAten(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) {
  if (m == 0 || n == 0) return;
  at::Tensor out = View(c, m, n, ldc, false);
  if (k == 0) {
    if (beta == 0.0f) {
      out.zero_();
    } else {
      out.mul_(beta);
    }
    return;
  }
  at::Tensor lhs = trans_a ? View(a, k, m, lda, true) : View(a, m, k, lda, false);
  at::Tensor rhs = trans_b ? View(b, n, k, ldb, true) : View(b, k, n, ldb, false);
  at::addmm_out(out, out, lhs, rhs, beta, alpha);
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
#ifdef DEEPNET_HAVE_CBLAS
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS would scale C by beta; keep the beta == 0 "write only" promise.
    GemmAten(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
#else
  GemmAten(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

bool GemmUsesCblas() {
#ifdef DEEPNET_HAVE_CBLAS
  return true;
#else
  return false;
#endif
}

}  // namespace deepnet::model::kernels
