#include "profiling/op_kinds.h"

#include <algorithm>
#include <initializer_list>
#include <string>

namespace deepnet::profiling {
namespace {

bool OneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// "aten::add_" -> "add"; "aten::_to_copy" -> "_to_copy" (in-place and out variants share a kind).
std::string_view BaseName(std::string_view name) {
  if (const size_t colon = name.rfind("::"); colon != std::string_view::npos) {
    name.remove_prefix(colon + 2);
  }
  if (name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_') {
    name.remove_suffix(1);
  }
  return name;
}

}  // namespace

std::string_view ToString(OpKind kind) {
  switch (kind) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kAttention: return "attention";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kNorm: return "norm";
    case OpKind::kReduction: return "reduction";
    case OpKind::kCopy: return "copy";
    case OpKind::kLoss: return "loss";
    case OpKind::kOptimizer: return "optimizer";
    case OpKind::kCommunication: return "communication";
    case OpKind::kAllocation: return "allocation";
    case OpKind::kView: return "view";
    case OpKind::kOther: return "other";
  }
  return "other";
}

OpKind KindOfOp(std::string_view full_name) {
  const std::string_view n = BaseName(full_name);
  if (OneOf(n, {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv",
                "dot", "_scaled_mm", "linear_backward", "mm_backward"})) {
    return OpKind::kGemm;
  }
  if (Contains(n, "attention") || Contains(n, "flash") || OneOf(n, {"softmax", "_softmax",
      "_softmax_backward_data", "softmax_backward_data"})) {
    return OpKind::kAttention;
  }
  if (Contains(n, "layer_norm") || Contains(n, "rms_norm")) return OpKind::kNorm;
  if (OneOf(n, {"log_softmax", "_log_softmax", "_log_softmax_backward_data", "nll_loss",
                "nll_loss_forward", "nll_loss_backward", "nll_loss_nd", "cross_entropy_loss",
                "gather", "scatter", "scatter_add"})) {
    return OpKind::kLoss;
  }
  if (OneOf(n, {"to", "_to_copy", "copy", "contiguous", "clone", "cat", "_cat", "stack",
                "index_select", "embedding", "embedding_backward", "embedding_dense_backward",
                "index", "index_put", "_index_put_impl", "masked_select", "repeat",
                "constant_pad_nd", "_pin_memory", "pin_memory"})) {
    return OpKind::kCopy;
  }
  if (OneOf(n, {"sum", "mean", "norm", "linalg_vector_norm", "_foreach_norm", "any", "all",
                "max", "min", "amax", "amin", "argmax", "prod", "var", "std", "count_nonzero",
                "sum_to_size", "_local_scalar_dense", "item"})) {
    return OpKind::kReduction;
  }
  if (OneOf(n, {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
                "ones_like", "full", "full_like", "resize", "scalar_tensor", "arange",
                "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full",
                "_empty_affine_quantized"})) {
    return OpKind::kAllocation;
  }
  if (OneOf(n, {"view", "_reshape_alias", "reshape", "_unsafe_view", "permute", "transpose",
                "t", "narrow", "slice", "select", "unbind", "split", "split_with_sizes",
                "chunk", "expand", "expand_as", "as_strided", "squeeze", "unsqueeze", "detach",
                "alias", "view_as", "flatten", "unflatten", "movedim", "numpy_T", "lift_fresh",
                "_to_dense", "unfold", "diagonal", "real", "resolve_conj", "resolve_neg",
                "set", "requires_grad", "_has_compatible_shallow_copy_type", "is_same_size",
                "result_type", "size", "stride", "_version", "output_nr", "_unsafe_index"})) {
    return OpKind::kView;
  }
  if (Contains(n, "_foreach_") || Contains(n, "_fused_adam")) return OpKind::kOptimizer;
  if (OneOf(n, {"add", "sub", "mul", "div", "neg", "rsub", "addcmul", "addcdiv", "lerp",
                "relu", "gelu", "gelu_backward", "threshold", "threshold_backward", "dropout",
                "native_dropout", "native_dropout_backward", "feature_dropout", "masked_fill",
                "where", "fill", "zero", "uniform", "bernoulli", "normal", "ge", "gt", "le",
                "lt", "eq", "ne", "logical_not", "logical_and", "logical_or", "bitwise_not",
                "exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "clamp", "clamp_min",
                "clamp_max", "abs", "sign", "tanh", "sigmoid", "triu", "tril", "mul_scalar",
                "maximum", "minimum", "sqrt_out", "_masked_scale", "masked_fill_backward"})) {
    return OpKind::kElementwise;
  }
  return OpKind::kOther;
}

OpKind KindOfKernel(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  const std::string_view n = lower;
  if (Contains(n, "nccl")) return OpKind::kCommunication;
  if (Contains(n, "memcpy") || Contains(n, "memset") || Contains(n, "cat_") ||
      Contains(n, "catarray")) {
    return OpKind::kCopy;
  }
  if (Contains(n, "flash") || Contains(n, "fmha") || Contains(n, "attention") ||
      Contains(n, "softmax_warp") || Contains(n, "cunn_softmax")) {
    return Contains(n, "log_softmax") || Contains(n, "logsoftmax") ? OpKind::kLoss
                                                                   : OpKind::kAttention;
  }
  if (Contains(n, "gemm") || Contains(n, "cutlass") || Contains(n, "xmma") ||
      Contains(n, "nvjet") || Contains(n, "cublas") || Contains(n, "wgmma")) {
    return OpKind::kGemm;
  }
  if (Contains(n, "layer_norm") || Contains(n, "layernorm")) return OpKind::kNorm;
  if (Contains(n, "adam") || Contains(n, "multi_tensor_apply")) return OpKind::kOptimizer;
  if (Contains(n, "nll_loss") || Contains(n, "softmax")) return OpKind::kLoss;
  if (Contains(n, "reduce")) return OpKind::kReduction;
  if (Contains(n, "elementwise") || Contains(n, "vectorized") || Contains(n, "unrolled") ||
      Contains(n, "fused_dropout") || Contains(n, "dropout")) {
    return OpKind::kElementwise;
  }
  return OpKind::kOther;
}

}  // namespace deepnet::profiling
