#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::data {

/// Highest n-gram order of BLEU.
inline constexpr int kBleuMaxOrder = 4;

/// What our BLEU reproduces, in sacreBLEU's signature format: one reference, case-sensitive, no
/// effective order, 13a tokenizer, exp smoothing, scored as sacreBLEU 2.6.0 scores. "+deepnet"
/// (a local version label) says that this implementation, not sacreBLEU, produced the number.
inline constexpr char kBleuSignature[] =
    "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0+deepnet";

/// Corpus BLEU and its sufficient statistics, as sacreBLEU's BLEUScore reports them.
struct BleuScore {
  // Corpus BLEU in [0, 100].
  double score = 0.0;
  // Clipped n-gram matches summed over the corpus; [n - 1].
  std::array<int64_t, kBleuMaxOrder> counts{};
  // Hypothesis n-grams summed over the corpus; [n - 1].
  std::array<int64_t, kBleuMaxOrder> totals{};
  // n-gram precisions in percent after exp smoothing; [n - 1]. All 0 when nothing matched.
  std::array<double, kBleuMaxOrder> precisions{};
  // Brevity penalty: exp(1 - ref_len / sys_len) when sys_len < ref_len, else 1 (0 if no tokens).
  double bp = 0.0;
  // Hypothesis and reference lengths in 13a tokens.
  int64_t sys_len = 0;
  int64_t ref_len = 0;

  // sys_len / ref_len; 0 when ref_len is 0.
  double ratio() const;
};

/// Corpus BLEU of `hyps` against one reference each (`refs[i]` for `hyps[i]`), exactly as
/// sacreBLEU 2.6.0 computes it with its defaults (see kBleuSignature): each line right-stripped
/// of Python whitespace and 13a-tokenized; clipped 1..4-gram counts and lengths summed over the
/// corpus; then BleuFromStatistics. Lines are UTF-8 (invalid bytes count as single characters);
/// an empty reference is allowed and has no n-grams. InvalidArgument when the counts differ.
/// Thread-compatible; allocates a few scratch buffers per call, not per n-gram.
[[nodiscard]] absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hyps,
                                                   const std::vector<std::string>& refs);

/// BLEU from corpus statistics (sacreBLEU BLEU.compute_bleu with smooth_method="exp"):
/// precision_n = 100 * counts / totals; an order with no matches gets 100 / (k * totals) with
/// k = 2, 4, 8, ... doubling at each such order; score = bp * exp(mean of log precisions).
/// The score is 0 when no n-gram of any order matched, or when some order has no hypothesis
/// n-grams at all (its precision stays 0).
BleuScore BleuFromStatistics(const std::array<int64_t, kBleuMaxOrder>& counts,
                             const std::array<int64_t, kBleuMaxOrder>& totals, int64_t sys_len,
                             int64_t ref_len);

/// sacreBLEU's one-line report, e.g.
/// "BLEU = 35.12 70.1/45.3/30.2/20.1 (BP = 0.987 ratio = 0.987 hyp_len = 9870 ref_len = 10000)".
std::string FormatBleu(const BleuScore& bleu);

/// The part of that line after the score (sacreBLEU's "verbose_score"), e.g.
/// "70.1/45.3/30.2/20.1 (BP = 0.987 ratio = 0.987 hyp_len = 9870 ref_len = 10000)".
std::string FormatBleuDetail(const BleuScore& bleu);

}  // namespace deepnet::data
