#pragma once

// Internal to data/: exact clipped n-gram matching shared by BLEU and chrF. A segment's n-grams
// are packed into integers and matched through a small open-addressing table that is reused
// from segment to segment, so scoring a corpus allocates only while the buffers grow.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace deepnet::data::internal {

// One n-gram of a fixed order, packed losslessly: up to four 32-bit token ids (BLEU) or six
// 21-bit code points (chrF). Exact keys, so no hash collision can change a score.
__extension__ typedef unsigned __int128 NgramKey;

// Counts min(count in hyp, count in ref) summed over distinct n-grams: the clipped match count
// of BLEU and chrF for one order of one segment. Not thread-safe; use one per thread.
class ClippedMatcher {
 public:
  int64_t Count(const std::vector<NgramKey>& hyp, const std::vector<NgramKey>& ref);

 private:
  struct Slot {
    uint64_t lo, hi;  // The key.
    uint32_t stamp;   // The slot is in use by the current Count() iff stamp == stamp_.
    int32_t count;    // Reference occurrences not yet matched.
  };
  std::vector<Slot> slots_;
  uint32_t stamp_ = 0;
};

// Maps the tokens of one segment to small ids (equal strings, equal ids). Not thread-safe.
class TokenInterner {
 public:
  // Forgets all tokens; at most `max_tokens` distinct tokens follow until the next Reset().
  void Reset(size_t max_tokens);
  // Id of `token`, which must stay alive until the next Reset(); ids count up from 0.
  uint32_t Id(std::string_view token);

 private:
  struct Slot {
    std::string_view token;
    uint32_t stamp;
    uint32_t id;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t stamp_ = 0;
  uint32_t next_id_ = 0;
};

}  // namespace deepnet::data::internal
