#include "data/chrf.h"

#include <cstdio>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/ngram_matching.h"
#include "data/unicode_text.h"

namespace deepnet::data {
namespace {

using internal::NgramKey;

// Code points fit in 21 bits, so six of them pack losslessly into 126 bits.
constexpr int kCodePointBits = 21;
static_assert(kChrfCharOrder * kCodePointBits <= 128, "n-gram key too small");

// Counts one segment pair at a time, reusing its buffers across segments.
class SegmentCounter {
 public:
  void Add(std::string_view hyp, std::string_view ref, ChrfScore* stats) {
    DecodeWithoutWhitespace(hyp, &hyp_chars_);
    DecodeWithoutWhitespace(ref, &ref_chars_);
    hyp_keys_.assign(hyp_chars_.size(), 0);
    ref_keys_.assign(ref_chars_.size(), 0);
    for (size_t n = 1; n <= kChrfCharOrder; ++n) {
      if (ref_chars_.size() < n) break;  // No reference n-grams: hyp n-grams not counted.
      stats->ref_ngrams[n - 1] += static_cast<int64_t>(ref_chars_.size() - n + 1);
      if (hyp_chars_.size() < n) continue;  // And so for every higher order.
      stats->hyp_ngrams[n - 1] += static_cast<int64_t>(hyp_chars_.size() - n + 1);
      ExtendNgrams(hyp_chars_, n, &hyp_keys_);
      ExtendNgrams(ref_chars_, n, &ref_keys_);
      stats->matches[n - 1] += matcher_.Count(hyp_keys_, ref_keys_);
    }
  }

 private:
  // sacreBLEU: ''.join(line.split()), then n-grams over code points.
  static void DecodeWithoutWhitespace(std::string_view line, std::vector<char32_t>* chars) {
    chars->clear();
    for (size_t pos = 0; pos < line.size();) {
      char32_t c = static_cast<unsigned char>(line[pos]);
      pos += c < 0x80 ? 1 : DecodeUtf8(line, pos, &c);  // ASCII fast path.
      if (!IsPythonWhitespace(c)) chars->push_back(c);
    }
  }

  // Turns the (n-1)-gram keys in *keys into the n-gram keys: key[i] covers chars[i, i + n).
  static void ExtendNgrams(const std::vector<char32_t>& chars, size_t n,
                           std::vector<NgramKey>* keys) {
    keys->resize(chars.size() - n + 1);
    for (size_t i = 0; i < keys->size(); ++i) {
      (*keys)[i] = (*keys)[i] << kCodePointBits | chars[i + n - 1];
    }
  }

  std::vector<char32_t> hyp_chars_;
  std::vector<char32_t> ref_chars_;
  std::vector<NgramKey> hyp_keys_;
  std::vector<NgramKey> ref_keys_;
  internal::ClippedMatcher matcher_;
};

}  // namespace

ChrfScore ChrfFromStatistics(const std::array<int64_t, kChrfCharOrder>& hyp_ngrams,
                             const std::array<int64_t, kChrfCharOrder>& ref_ngrams,
                             const std::array<int64_t, kChrfCharOrder>& matches) {
  ChrfScore chrf;
  chrf.hyp_ngrams = hyp_ngrams;
  chrf.ref_ngrams = ref_ngrams;
  chrf.matches = matches;
  // Effective-order averaging, as sacreBLEU does by default (its "eff:yes").
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int n = 0; n < kChrfCharOrder; ++n) {
    if (hyp_ngrams[n] > 0 && ref_ngrams[n] > 0) {
      avg_prec += static_cast<double>(matches[n]) / static_cast<double>(hyp_ngrams[n]);
      avg_rec += static_cast<double>(matches[n]) / static_cast<double>(ref_ngrams[n]);
      ++effective_order;
    }
  }
  if (effective_order == 0) return chrf;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return chrf;
  // F_beta (Popovic, WMT 2015): (1 + b^2) P R / (b^2 P + R), in this evaluation order.
  const double factor = kChrfBeta * kChrfBeta;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= factor * avg_prec + avg_rec;
  chrf.score = 100 * score;
  return chrf;
}

absl::StatusOr<ChrfScore> CorpusChrf(const std::vector<std::string>& hyps,
                                     const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("chrF: ", hyps.size(), " hypothesis lines but ",
                                                   refs.size(), " reference lines"));
  }
  ChrfScore stats;
  SegmentCounter counter;
  for (size_t i = 0; i < hyps.size(); ++i) counter.Add(hyps[i], refs[i], &stats);
  return ChrfFromStatistics(stats.hyp_ngrams, stats.ref_ngrams, stats.matches);
}

std::string FormatChrf(const ChrfScore& chrf) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "chrF%d = %.2f", kChrfBeta, chrf.score);
  return buffer;
}

}  // namespace deepnet::data
