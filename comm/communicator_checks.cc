#include "comm/communicator_checks.h"

#include "absl/strings/str_cat.h"

namespace deepnet::comm::internal {

std::string RankLabel(int rank, int size) { return absl::StrCat("rank ", rank, "/", size); }

std::string DtypeName(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Short:
      return "int16";
    case c10::ScalarType::Char:
      return "int8";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Bool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

std::string DescribeTensor(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "undefined tensor";
  return absl::StrCat(tensor.numel(), " ", DtypeName(tensor.scalar_type()));
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return absl::StrCat(duration.count() / 1000, " s");
  return absl::StrCat(duration.count(), " ms");
}

absl::Status CheckTensor(const torch::Tensor& tensor, bool require_cpu, const std::string& what) {
  if (!tensor.defined()) return absl::InvalidArgumentError(what + ": tensor is undefined");
  if (tensor.is_sparse() || tensor.layout() != c10::kStrided) {
    return absl::InvalidArgumentError(what + ": tensor must be dense (strided)");
  }
  if (!tensor.is_contiguous()) {
    return absl::InvalidArgumentError(what + ": tensor of " + DescribeTensor(tensor) +
                                      " is not contiguous");
  }
  if (require_cpu && !tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tensor is on ", tensor.device().str(),
                                                   "; this backend moves CPU tensors only"));
  }
  return absl::OkStatus();
}

absl::Status CheckPeer(int peer, int tag, int size, const std::string& what) {
  if (peer < 0 || peer >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": peer rank ", peer, " is outside the group of ", size));
  }
  if (tag < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": tag ", tag, " < 0"));
  return absl::OkStatus();
}

absl::Status DeadlineError(const std::string& what, std::chrono::milliseconds timeout) {
  return absl::DeadlineExceededError(
      absl::StrCat(what, " did not complete within ", FormatDuration(timeout)));
}

absl::Status AbortedError(const std::string& label, const std::string& op,
                          const std::string& reason) {
  return absl::FailedPreconditionError(
      absl::StrCat(label, ": ", op, " on an aborted communicator (", reason, ")"));
}

}  // namespace deepnet::comm::internal
