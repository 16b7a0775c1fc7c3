#pragma once

#include <array>
#include <string_view>

namespace deepnet::profiling {

/// What an ATen op (or a GPU kernel, by its name) spends its time on, for the profile's
/// breakdown of a training step. kView ops launch no kernel (views, detach); kOptimizer and
/// kCommunication are given by the step's own scopes (RECORD_USER_SCOPE names starting
/// "deepnet::optimizer" or "deepnet::collective"), whatever the op inside them.
enum class OpKind {
  kGemm,           // mm, addmm, bmm, linear, matmul, GEMM kernels
  kAttention,      // scaled_dot_product_attention and its kernels, softmax
  kElementwise,    // add, mul, dropout, activations, masked_fill, casts' arithmetic cousins
  kNorm,           // layer_norm and its backward
  kReduction,      // sum, norm, any, max
  kCopy,           // to, copy_, contiguous, cat, stack, clone, memcpy/memset kernels
  kLoss,           // log_softmax, gather, nll_loss
  kOptimizer,      // inside the optimizer's scope
  kCommunication,  // inside a collective's scope, NCCL kernels
  kAllocation,     // empty, zeros, ones, resize_
  kView,           // view, reshape, permute, narrow, unbind, detach: no kernel
  kOther,
};
inline constexpr int kOpKinds = static_cast<int>(OpKind::kOther) + 1;

std::string_view ToString(OpKind kind);

/// The kind of an ATen op by its schema name ("aten::addmm"); also accepts a bare name
/// ("addmm", "add_"). Unknown names are kOther.
OpKind KindOfOp(std::string_view name);

/// The kind of a GPU kernel by its (demangled) name, as Kineto reports it.
OpKind KindOfKernel(std::string_view name);

template <typename T>
using PerKind = std::array<T, kOpKinds>;

}  // namespace deepnet::profiling
