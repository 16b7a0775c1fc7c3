#pragma once

#include <torch/types.h>

namespace deepnet::model {

/// Sequence packing: the tokens of several pairs share one row of a batch, so that rows carry
/// little padding. A packed side is described by its segment ids, [B, L] int64: the pairs of a
/// row are numbered 1, 2, ... in order along the row and padding is 0; source pair k and target
/// pair k of a row carry the same number. Every pair sees only itself: attention is
/// block-diagonal (SegmentHidden) and positions restart at 0 for every pair (SegmentPositions),
/// so a packed pair computes what it would alone in a row of its own.

/// Position of every token within its pair, [B, L] int64 (padding counts from 0 too, from the
/// end of the row's last pair).
torch::Tensor SegmentPositions(const torch::Tensor& segments);

/// Which keys each query may not see, [B, T, S] bool (true = hidden): keys of another pair and
/// padding. For self-attention pass the same ids twice; for cross-attention the target's and
/// the source's. A padding query sees no key. Causal order is applied separately.
torch::Tensor SegmentHidden(const torch::Tensor& query_segments, const torch::Tensor& key_segments);

/// Everything a packed batch's forward needs besides its tokens, from its segment ids
/// (either may be undefined: encoder-only or decoder-only models; the tensors that need it are
/// undefined then).
struct PackedLayout {
  torch::Tensor source_positions;  // [B, S] int64
  torch::Tensor target_positions;  // [B, T] int64
  torch::Tensor encoder_mask;      // [B, S, S] encoder self-attention
  torch::Tensor cross_mask;        // [B, T, S] decoder cross-attention
  torch::Tensor decoder_mask;      // [B, T, T] decoder self-attention (with causal order)
};
PackedLayout LayoutOfPacked(const torch::Tensor& source_segments,
                            const torch::Tensor& target_segments);

}  // namespace deepnet::model
