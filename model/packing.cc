#include "model/packing.h"

#include <torch/torch.h>

namespace deepnet::model {

torch::Tensor SegmentPositions(const torch::Tensor& segments) {
  TORCH_CHECK(segments.dim() == 2, "packing: segment ids must be [B, L], got ",
              segments.sizes());
  const int64_t len = segments.size(1);
  const torch::Tensor index =
      torch::arange(len, segments.options().dtype(torch::kLong)).expand_as(segments);
  if (len == 0) return index.clone();
  // A pair starts where the id changes; each token counts from the latest start at or before it.
  torch::Tensor starts = torch::ones_like(segments, torch::kBool);
  starts.narrow(1, 1, len - 1)
      .copy_(segments.narrow(1, 1, len - 1).ne(segments.narrow(1, 0, len - 1)));
  const torch::Tensor start_index =
      std::get<0>(torch::where(starts, index, torch::zeros_like(index)).cummax(1));
  return index - start_index;
}

torch::Tensor SegmentHidden(const torch::Tensor& query_segments,
                            const torch::Tensor& key_segments) {
  TORCH_CHECK(query_segments.dim() == 2 && key_segments.dim() == 2 &&
                  query_segments.size(0) == key_segments.size(0),
              "packing: segment ids [B, T] and [B, S] expected, got ", query_segments.sizes(),
              " and ", key_segments.sizes());
  return query_segments.unsqueeze(2)
      .ne(key_segments.unsqueeze(1))
      .logical_or_(key_segments.eq(0).unsqueeze(1));
}

PackedLayout LayoutOfPacked(const torch::Tensor& source_segments,
                            const torch::Tensor& target_segments) {
  PackedLayout p;
  if (source_segments.defined()) {
    p.source_positions = SegmentPositions(source_segments);
    p.encoder_mask = SegmentHidden(source_segments, source_segments);
  }
  if (target_segments.defined()) {
    p.target_positions = SegmentPositions(target_segments);
    p.decoder_mask = SegmentHidden(target_segments, target_segments);
    if (source_segments.defined()) p.cross_mask = SegmentHidden(target_segments, source_segments);
  }
  return p;
}

}  // namespace deepnet::model
