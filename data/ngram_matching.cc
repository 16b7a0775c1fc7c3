#include "data/ngram_matching.h"

#include <functional>

namespace deepnet::data::internal {
namespace {

// log2 of the smallest power of two >= 2 * n (load factor at most 1/2), at least 4.
int TableBits(size_t n) {
  int bits = 4;
  while ((size_t{1} << bits) < 2 * n) ++bits;
  return bits;
}

// Advances a use stamp; on wrap-around every slot is marked unused again.
template <typename Slot>
uint32_t NextStamp(uint32_t stamp, std::vector<Slot>* slots) {
  if (++stamp == 0) {
    for (Slot& slot : *slots) slot.stamp = 0;
    stamp = 1;
  }
  return stamp;
}

// Fibonacci hashing (Knuth, TAOCP 6.4): the top `bits` bits of key * 2^64/phi. The high word is
// folded in first so that every symbol of the n-gram reaches the top bits.
size_t SlotOf(uint64_t lo, uint64_t hi, int bits) {
  return static_cast<size_t>(((lo ^ hi * 0xC2B2AE3D27D4EB4FULL) * 0x9E3779B97F4A7C15ULL) >>
                             (64 - bits));
}

}  // namespace

int64_t ClippedMatcher::Count(const std::vector<NgramKey>& hyp, const std::vector<NgramKey>& ref) {
  if (hyp.empty() || ref.empty()) return 0;
  const int bits = TableBits(ref.size());
  const size_t mask = (size_t{1} << bits) - 1;
  if (slots_.size() <= mask) slots_.resize(mask + 1, Slot{0, 0, 0, 0});
  stamp_ = NextStamp(stamp_, &slots_);
  for (const NgramKey key : ref) {
    const auto lo = static_cast<uint64_t>(key), hi = static_cast<uint64_t>(key >> 64);
    for (size_t i = SlotOf(lo, hi, bits);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.stamp != stamp_) {
        slot = Slot{lo, hi, stamp_, 1};
        break;
      }
      if (slot.lo == lo && slot.hi == hi) {
        ++slot.count;
        break;
      }
    }
  }
  int64_t matches = 0;
  for (const NgramKey key : hyp) {
    const auto lo = static_cast<uint64_t>(key), hi = static_cast<uint64_t>(key >> 64);
    for (size_t i = SlotOf(lo, hi, bits);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.stamp != stamp_) break;  // Not in the reference.
      if (slot.lo == lo && slot.hi == hi) {
        if (slot.count > 0) {
          --slot.count;
          ++matches;
        }
        break;
      }
    }
  }
  return matches;
}

void TokenInterner::Reset(size_t max_tokens) {
  const size_t size = size_t{1} << TableBits(max_tokens);
  if (slots_.size() < size) slots_.resize(size, Slot{{}, 0, 0});
  stamp_ = NextStamp(stamp_, &slots_);
  mask_ = size - 1;
  next_id_ = 0;
}

uint32_t TokenInterner::Id(std::string_view token) {
  for (size_t i = std::hash<std::string_view>{}(token) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.stamp != stamp_) {
      slot = Slot{token, stamp_, next_id_};
      return next_id_++;
    }
    if (slot.token == token) return slot.id;
  }
}

}  // namespace deepnet::data::internal
