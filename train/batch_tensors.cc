#include "train/batch_tensors.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

namespace deepnet::train {
namespace {

int64_t SourceLength(const data::TokenizedExample& ex) {
  return static_cast<int64_t>(ex.src.size());
}
int64_t TargetLength(const data::TokenizedExample& ex) {
  return static_cast<int64_t>(ex.tgt.size());
}

}  // namespace

std::vector<std::vector<int64_t>> PackRows(const std::vector<data::TokenizedExample>& examples,
                                           const std::vector<int64_t>& indices,
                                           int64_t pack_tokens) {
  std::vector<int64_t> order(indices.size());
  std::iota(order.begin(), order.end(), 0);
  const auto longest = [&](int64_t k) {
    const auto& ex = examples[indices[k]];
    return std::max(SourceLength(ex), TargetLength(ex));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return longest(a) > longest(b); });
  struct Row {
    std::vector<int64_t> pairs;
    int64_t src = 0, tgt = 0, capacity = 0;
  };
  std::vector<Row> rows;
  for (int64_t k : order) {
    const auto& ex = examples[indices[k]];
    const int64_t s = SourceLength(ex), t = TargetLength(ex);
    auto fits = [&](const Row& r) { return r.src + s <= r.capacity && r.tgt + t <= r.capacity; };
    auto row = std::find_if(rows.begin(), rows.end(), fits);
    if (row == rows.end()) {
      rows.push_back(Row{{}, 0, 0, std::max(pack_tokens, longest(k))});
      row = rows.end() - 1;
    }
    row->pairs.push_back(k);
    row->src += s;
    row->tgt += t;
  }
  std::vector<std::vector<int64_t>> out;
  out.reserve(rows.size());
  for (Row& r : rows) out.push_back(std::move(r.pairs));
  return out;
}

pipeline::MicroBatch ToMicroBatch(BatchTensors batch, const torch::Device& device) {
  pipeline::MicroBatch m;
  m.src = batch.src.to(device);
  m.tgt_in = batch.tgt_in.to(device);
  m.tgt_out = batch.tgt_out.to(device);
  if (batch.src_segments.defined()) m.src_segments = batch.src_segments.to(device);
  if (batch.tgt_segments.defined()) m.tgt_segments = batch.tgt_segments.to(device);
  m.src_tokens = batch.src_tokens;
  m.tgt_tokens = batch.tgt_tokens;
  return m;
}

BatchTensors MakeBatch(const std::vector<data::TokenizedExample>& examples,
                       const std::vector<int64_t>& indices, const SpecialIds& ids,
                       const torch::Device& device, int64_t pack_tokens) {
  const bool packed = pack_tokens > 0;
  std::vector<std::vector<int64_t>> rows;
  if (packed) {
    rows = PackRows(examples, indices, pack_tokens);
  } else {
    for (size_t k = 0; k < indices.size(); ++k) rows.push_back({static_cast<int64_t>(k)});
  }
  const int64_t b = static_cast<int64_t>(rows.size());
  int64_t s = 1, t = 1;
  for (const auto& row : rows) {
    int64_t row_s = 0, row_t = 0;
    for (int64_t k : row) {
      row_s += SourceLength(examples[indices[k]]);
      row_t += TargetLength(examples[indices[k]]);
    }
    s = std::max(s, row_s);
    t = std::max(t, row_t);
  }
  BatchTensors out;
  out.src = torch::full({b, s}, ids.pad, torch::kLong);
  out.tgt_in = torch::full({b, t}, ids.pad, torch::kLong);
  out.tgt_out = torch::full({b, t}, ids.pad, torch::kLong);
  if (packed) {
    out.src_segments = torch::zeros({b, s}, torch::kLong);
    out.tgt_segments = torch::zeros({b, t}, torch::kLong);
  }
  auto src = out.src.accessor<int64_t, 2>();
  auto tin = out.tgt_in.accessor<int64_t, 2>();
  auto tout = out.tgt_out.accessor<int64_t, 2>();
  // Segment ids are written only for packed batches (the accessors are unused otherwise).
  torch::Tensor src_ids = packed ? out.src_segments : torch::zeros({1, 1}, torch::kLong);
  torch::Tensor tgt_ids = packed ? out.tgt_segments : torch::zeros({1, 1}, torch::kLong);
  auto src_seg = src_ids.accessor<int64_t, 2>();
  auto tgt_seg = tgt_ids.accessor<int64_t, 2>();
  for (int64_t row = 0; row < b; ++row) {
    int64_t src_at = 0, tgt_at = 0, segment = 0;
    for (int64_t k : rows[row]) {
      const auto& ex = examples[indices[k]];
      ++segment;
      const int64_t sl = SourceLength(ex), tl = TargetLength(ex);
      for (int64_t j = 0; j < sl; ++j) src[row][src_at + j] = ex.src[j];
      // `BOS tokens` in; `tokens EOS` out (a pair without target tokens still gets its BOS
      // when it has a row of its own, as before packing).
      if (tl > 0 || !packed) tin[row][tgt_at] = ids.bos;
      for (int64_t j = 0; j < tl; ++j) {
        tout[row][tgt_at + j] = ex.tgt[j];
        if (j + 1 < tl) tin[row][tgt_at + j + 1] = ex.tgt[j];
      }
      if (packed) {
        for (int64_t j = 0; j < sl; ++j) src_seg[row][src_at + j] = segment;
        for (int64_t j = 0; j < tl; ++j) tgt_seg[row][tgt_at + j] = segment;
      }
      src_at += sl;
      tgt_at += tl;
      out.src_tokens += sl;
      out.tgt_tokens += tl;
    }
  }
  if (device != torch::kCPU) {
    out.src = out.src.to(device);
    out.tgt_in = out.tgt_in.to(device);
    out.tgt_out = out.tgt_out.to(device);
    if (packed) {
      out.src_segments = out.src_segments.to(device);
      out.tgt_segments = out.tgt_segments.to(device);
    }
  }
  return out;
}

}  // namespace deepnet::train
