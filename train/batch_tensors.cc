#include "train/batch_tensors.h"

#include <torch/torch.h>

#include <algorithm>

namespace deepnet::train {

BatchTensors MakeBatch(const std::vector<data::TokenizedExample>& examples,
                       const std::vector<int64_t>& indices, const SpecialIds& ids,
                       const torch::Device& device) {
  const int64_t b = static_cast<int64_t>(indices.size());
  int64_t s = 1, t = 1;
  for (int64_t i : indices) {
    s = std::max<int64_t>(s, examples[i].src.size());
    t = std::max<int64_t>(t, examples[i].tgt.size());
  }
  BatchTensors out;
  out.src = torch::full({b, s}, ids.pad, torch::kLong);
  out.tgt_in = torch::full({b, t}, ids.pad, torch::kLong);
  out.tgt_out = torch::full({b, t}, ids.pad, torch::kLong);
  auto src = out.src.accessor<int64_t, 2>();
  auto tin = out.tgt_in.accessor<int64_t, 2>();
  auto tout = out.tgt_out.accessor<int64_t, 2>();
  for (int64_t row = 0; row < b; ++row) {
    const auto& ex = examples[indices[row]];
    for (size_t j = 0; j < ex.src.size(); ++j) src[row][j] = ex.src[j];
    tin[row][0] = ids.bos;
    for (size_t j = 0; j < ex.tgt.size(); ++j) {
      tout[row][j] = ex.tgt[j];
      if (j + 1 < ex.tgt.size()) tin[row][j + 1] = ex.tgt[j];
    }
    out.src_tokens += ex.src.size();
    out.tgt_tokens += ex.tgt.size();
  }
  if (device != torch::kCPU) {
    out.src = out.src.to(device);
    out.tgt_in = out.tgt_in.to(device);
    out.tgt_out = out.tgt_out.to(device);
  }
  return out;
}

}  // namespace deepnet::train
