#include "model/kernels/residual_layer_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/kernels/dropout_mask.h"
#include "model/kernels/row_math.h"

namespace deepnet::model::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kRowGrain = 16;

struct RowSizes {
  int64_t rows;
  int64_t dim;
};

RowSizes SizesOf(const torch::Tensor& x) {
  const int64_t dim = x.size(-1);
  return {dim == 0 ? 0 : x.numel() / dim, dim};
}

// One residual LayerNorm forward over rows [begin, end); see ResidualLayerNormForward.
struct ForwardRows {
  const float *x, *branch, *weight, *bias;
  const uint8_t* keep;  // null without dropout
  float *y, *xhat, *rstd;
  int64_t dim;
  float alpha, keep_scale, eps;
};

DEEPNET_ROW_PASS void RunForwardRows(const ForwardRows& p, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * p.dim;
    float* h = p.xhat + o;
    const float* xr = p.x + o;
    const float* br = p.branch + o;
    if (p.keep != nullptr) {
      const uint8_t* kr = p.keep + o;
      for (int64_t j = 0; j < p.dim; ++j) {
        h[j] = p.alpha * xr[j] + br[j] * (static_cast<float>(kr[j]) * p.keep_scale);
      }
    } else {
      for (int64_t j = 0; j < p.dim; ++j) h[j] = p.alpha * xr[j] + br[j];
    }
    const float mean = RowSum(h, p.dim) / static_cast<float>(p.dim);
    const float var = RowCenteredSquares(h, mean, p.dim) / static_cast<float>(p.dim);
    const float inv = 1.0f / std::sqrt(var + p.eps);
    p.rstd[r] = inv;
    float* yr = p.y + o;
    for (int64_t j = 0; j < p.dim; ++j) {
      h[j] = (h[j] - mean) * inv;
      yr[j] = h[j] * p.weight[j] + p.bias[j];
    }
  }
}

// Its backward over rows [begin, end); see ResidualLayerNormBackward.
struct BackwardRows {
  const float *dy, *xhat, *rstd, *weight;
  const uint8_t* keep;  // null without dropout
  float *dx, *dbranch;
  int64_t dim;
  float alpha, keep_scale;
  bool accumulate_dx;
};

DEEPNET_ROW_PASS void RunBackwardRows(const BackwardRows& p, int64_t begin, int64_t end) {
  std::vector<float> gw_row(p.dim);  // dy * weight for one row.
  float* gw = gw_row.data();
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * p.dim;
    const float* gr = p.dy + o;
    const float* hr = p.xhat + o;
    for (int64_t j = 0; j < p.dim; ++j) gw[j] = gr[j] * p.weight[j];
    const float mean_g = RowSum(gw, p.dim) / static_cast<float>(p.dim);
    const float mean_gh = RowDot(gw, hr, p.dim) / static_cast<float>(p.dim);
    const float inv = p.rstd[r];
    float* dxr = p.dx + o;
    float* dbr = p.dbranch + o;
    for (int64_t j = 0; j < p.dim; ++j) {
      const float dh = inv * (gw[j] - mean_g - hr[j] * mean_gh);
      dxr[j] = p.accumulate_dx ? dxr[j] + p.alpha * dh : p.alpha * dh;
      dbr[j] = dh;
    }
    if (p.keep != nullptr) {
      ApplyKeepMask(dbr, dbr, p.keep + o, p.keep_scale, p.dim);
    }
  }
}

// dweight = column sums of dy * xhat, dbias = column sums of dy, in row order (deterministic for
// any thread count).
DEEPNET_ROW_PASS void SumColumns(const float* dy, const float* xhat, int64_t rows, int64_t dim,
                                 float* dweight, float* dbias) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * dim;
    for (int64_t j = 0; j < dim; ++j) {
      dweight[j] += dy[o + j] * xhat[o + j];
      dbias[j] += dy[o + j];
    }
  }
}

}  // namespace

ResidualLayerNormState ResidualLayerNormForward(const torch::Tensor& x_in,
                                                const torch::Tensor& branch_in,
                                                const torch::Tensor& weight_in,
                                                const torch::Tensor& bias_in, double alpha,
                                                double dropout, double eps, bool training) {
  const torch::Tensor x = x_in.contiguous();
  const torch::Tensor branch = branch_in.contiguous();
  const torch::Tensor weight = weight_in.contiguous();
  const torch::Tensor bias = bias_in.contiguous();
  const auto [rows, dim] = SizesOf(x);
  const bool drop = training && dropout > 0.0;
  const float keep_scale = drop ? static_cast<float>(1.0 / (1.0 - dropout)) : 1.0f;

  torch::Tensor keep = torch::empty({0}, x.options().dtype(torch::kUInt8));  // No dropout.
  if (drop) {
    keep = torch::empty(x.sizes(), x.options().dtype(torch::kUInt8));
    FillDropoutKeepMask(keep.data_ptr<uint8_t>(), keep.numel(), dropout);
  }
  torch::Tensor y = torch::empty_like(x);
  torch::Tensor xhat = torch::empty_like(x);
  torch::Tensor rstd = torch::empty({rows}, x.options());

  const float* xp = x.data_ptr<float>();
  const float* bp = branch.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  const float* biasp = bias.data_ptr<float>();
  const uint8_t* kp = drop ? keep.data_ptr<uint8_t>() : nullptr;
  float* yp = y.data_ptr<float>();
  float* hp = xhat.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  const ForwardRows rows_pass{xp, bp, wp, biasp, kp, yp, hp, rp, dim, static_cast<float>(alpha),
                              keep_scale, static_cast<float>(eps)};
  at::parallel_for(0, rows, kRowGrain,
                   [&](int64_t begin, int64_t end) { RunForwardRows(rows_pass, begin, end); });
  ResidualLayerNormState state;
  state.y = y;
  state.xhat = xhat;
  state.rstd = rstd;
  state.keep = keep;
  state.keep_scale = keep_scale;
  return state;
}

void ResidualLayerNormBackward(const ResidualLayerNormState& state, const torch::Tensor& weight_in,
                               double alpha, const torch::Tensor& dy_in, bool accumulate_dx,
                               torch::Tensor& dx, torch::Tensor& dbranch, torch::Tensor& dweight,
                               torch::Tensor& dbias) {
  const float a = static_cast<float>(alpha);
  const float keep_scale = state.keep_scale;
  const torch::Tensor& xhat = state.xhat;
  const torch::Tensor& rstd = state.rstd;
  const torch::Tensor& keep = state.keep;
  const torch::Tensor weight = weight_in.contiguous();
  const torch::Tensor dy = dy_in.contiguous();
  const auto [rows, dim] = SizesOf(xhat);

  if (!accumulate_dx) dx = torch::empty_like(xhat);
  dbranch = torch::empty_like(xhat);
  const float* gp = dy.data_ptr<float>();
  const float* hp = xhat.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  const uint8_t* kp = keep.numel() > 0 ? keep.data_ptr<uint8_t>() : nullptr;
  float* dxp = dx.data_ptr<float>();
  float* dbp = dbranch.data_ptr<float>();
  const BackwardRows rows_pass{gp, hp, rp, wp, kp, dxp, dbp, dim, a, keep_scale, accumulate_dx};
  at::parallel_for(0, rows, kRowGrain,
                   [&](int64_t begin, int64_t end) { RunBackwardRows(rows_pass, begin, end); });
  // Weight and bias gradients: column sums over the rows, in row order (deterministic for
  // any thread count).
  dweight = torch::empty({dim}, xhat.options());
  dbias = torch::empty({dim}, xhat.options());
  float* dwp = dweight.data_ptr<float>();
  float* dbiasp = dbias.data_ptr<float>();
  std::fill(dwp, dwp + dim, 0.0f);
  std::fill(dbiasp, dbiasp + dim, 0.0f);
  SumColumns(gp, hp, rows, dim, dwp, dbiasp);
}

namespace {

class ResidualLayerNormFunction : public torch::autograd::Function<ResidualLayerNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& branch, const torch::Tensor& weight,
                               const torch::Tensor& bias, double alpha, double dropout,
                               double eps, bool training) {
    ResidualLayerNormState state =
        ResidualLayerNormForward(x, branch, weight, bias, alpha, dropout, eps, training);
    std::vector<torch::Tensor> saved = state.ToSave();
    saved.push_back(weight);
    ctx->save_for_backward(saved);
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["keep_scale"] = static_cast<double>(state.keep_scale);
    return state.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const ResidualLayerNormState state =
        ResidualLayerNormState::FromSaved(saved, 0, ctx->saved_data["keep_scale"].toDouble());
    torch::Tensor dx, dbranch, dweight, dbias;
    ResidualLayerNormBackward(state, saved[3], ctx->saved_data["alpha"].toDouble(),
                              grad_outputs[0], /*accumulate_dx=*/false, dx, dbranch, dweight,
                              dbias);
    return {dx, dbranch, dweight, dbias, torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ResidualLayerNorm(const torch::Tensor& x, const torch::Tensor& branch,
                                const torch::Tensor& weight, const torch::Tensor& bias,
                                double alpha, double dropout, double eps, bool training) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat,
              "ResidualLayerNorm: x must be a float32 CPU tensor");
  TORCH_CHECK(branch.sizes() == x.sizes() && branch.scalar_type() == torch::kFloat,
              "ResidualLayerNorm: branch must match x");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1) && bias.sizes() == weight.sizes(),
              "ResidualLayerNorm: weight and bias must be [", x.size(-1), "]");
  TORCH_CHECK(dropout >= 0.0 && dropout < 1.0, "ResidualLayerNorm: dropout must be in [0, 1)");
  return ResidualLayerNormFunction::apply(x, branch, weight, bias, alpha, dropout, eps, training);
}

}  // namespace deepnet::model::kernels
