#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::data {

/// chrF2 parameters (sacreBLEU's defaults): character n-grams of order 1..6, no word n-grams,
/// recall weighted by beta = 2.
inline constexpr int kChrfCharOrder = 6;
inline constexpr int kChrfBeta = 2;

/// What our chrF reproduces, in sacreBLEU's signature format (chrF2 with nc:6, nw:0, whitespace
/// removed, effective-order averaging); "+deepnet" says this implementation produced the number.
inline constexpr char kChrfSignature[] =
    "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0+deepnet";

/// Corpus chrF2 and the corpus statistics it was computed from.
struct ChrfScore {
  // chrF2 in [0, 100].
  double score = 0.0;
  // Hypothesis character n-grams, counted only in segments whose reference has n-grams of that
  // order; [n - 1].
  std::array<int64_t, kChrfCharOrder> hyp_ngrams{};
  // Reference character n-grams; [n - 1].
  std::array<int64_t, kChrfCharOrder> ref_ngrams{};
  // Clipped matches; [n - 1].
  std::array<int64_t, kChrfCharOrder> matches{};
};

/// Corpus chrF2 of `hyps` against one reference each, exactly as sacreBLEU 2.6.0 computes it:
/// per segment, all Python whitespace removed, code-point n-grams of order 1..6 counted and
/// clipped; an order for which the reference has no n-grams counts no hypothesis n-grams
/// either. The statistics are summed over the corpus, then ChrfFromStatistics. Lines are UTF-8
/// (an invalid byte counts as one character). InvalidArgument when the counts differ.
/// Thread-compatible.
[[nodiscard]] absl::StatusOr<ChrfScore> CorpusChrf(const std::vector<std::string>& hyps,
                                                   const std::vector<std::string>& refs);

/// chrF from corpus statistics (sacreBLEU CHRF._compute_f_score without eps smoothing): the
/// precisions matches/hyp and recalls matches/ref are averaged over the orders where both hyp
/// and ref counts are non-zero; F_beta of the two averages, times 100; 0 if no order counts.
ChrfScore ChrfFromStatistics(const std::array<int64_t, kChrfCharOrder>& hyp_ngrams,
                             const std::array<int64_t, kChrfCharOrder>& ref_ngrams,
                             const std::array<int64_t, kChrfCharOrder>& matches);

/// sacreBLEU's one-line report, e.g. "chrF2 = 77.77".
std::string FormatChrf(const ChrfScore& chrf);

}  // namespace deepnet::data
