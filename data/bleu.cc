#include "data/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/ngram_matching.h"
#include "data/tokenizer_13a.h"
#include "data/unicode_text.h"

namespace deepnet::data {
namespace {

using internal::NgramKey;

struct BleuStatistics {
  std::array<int64_t, kBleuMaxOrder> counts{};
  std::array<int64_t, kBleuMaxOrder> totals{};
  int64_t sys_len = 0;
  int64_t ref_len = 0;
};

// Accumulates one segment pair at a time. Tokens are mapped to small per-segment ids so that an
// n-gram is a packed integer rather than a string; all buffers are reused across segments.
class SegmentCounter {
 public:
  void Add(std::string_view hyp, std::string_view ref, BleuStatistics* stats) {
    const std::vector<std::string_view>& hyp_tokens =
        hyp_tokenizer_.Tokenize(RStripPythonWhitespace(hyp));
    const std::vector<std::string_view>& ref_tokens =
        ref_tokenizer_.Tokenize(RStripPythonWhitespace(ref));
    const size_t num_hyp = hyp_tokens.size(), num_ref = ref_tokens.size();
    stats->sys_len += static_cast<int64_t>(num_hyp);
    stats->ref_len += static_cast<int64_t>(num_ref);  // One reference: it is the closest.
    for (size_t n = 1; n <= kBleuMaxOrder && n <= num_hyp; ++n) {
      stats->totals[n - 1] += static_cast<int64_t>(num_hyp - n + 1);
    }
    if (num_hyp == 0 || num_ref == 0) return;

    interner_.Reset(num_hyp + num_ref);
    hyp_ids_.clear();
    ref_ids_.clear();
    for (const std::string_view token : hyp_tokens) hyp_ids_.push_back(interner_.Id(token));
    for (const std::string_view token : ref_tokens) ref_ids_.push_back(interner_.Id(token));
    hyp_keys_.assign(num_hyp, 0);
    ref_keys_.assign(num_ref, 0);
    for (size_t n = 1; n <= kBleuMaxOrder && n <= num_hyp && n <= num_ref; ++n) {
      ExtendNgrams(hyp_ids_, n, &hyp_keys_);
      ExtendNgrams(ref_ids_, n, &ref_keys_);
      stats->counts[n - 1] += matcher_.Count(hyp_keys_, ref_keys_);
    }
  }

 private:
  // Turns the (n-1)-gram keys in *keys into the n-gram keys: key[i] covers ids[i, i + n).
  static void ExtendNgrams(const std::vector<uint32_t>& ids, size_t n,
                           std::vector<NgramKey>* keys) {
    keys->resize(ids.size() - n + 1);
    for (size_t i = 0; i < keys->size(); ++i) (*keys)[i] = (*keys)[i] << 32 | ids[i + n - 1];
  }

  Tokenizer13a hyp_tokenizer_;
  Tokenizer13a ref_tokenizer_;
  internal::TokenInterner interner_;
  internal::ClippedMatcher matcher_;
  std::vector<uint32_t> hyp_ids_;
  std::vector<uint32_t> ref_ids_;
  std::vector<NgramKey> hyp_keys_;
  std::vector<NgramKey> ref_keys_;
};

// sacreBLEU's my_log: log(0) is a large negative number instead of -inf.
double SacreLog(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

double BleuScore::ratio() const {
  return ref_len == 0 ? 0.0 : static_cast<double>(sys_len) / static_cast<double>(ref_len);
}

BleuScore BleuFromStatistics(const std::array<int64_t, kBleuMaxOrder>& counts,
                             const std::array<int64_t, kBleuMaxOrder>& totals, int64_t sys_len,
                             int64_t ref_len) {
  BleuScore bleu;
  bleu.counts = counts;
  bleu.totals = totals;
  bleu.sys_len = sys_len;
  bleu.ref_len = ref_len;
  if (sys_len < ref_len) {
    bleu.bp = sys_len > 0
                  ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(sys_len))
                  : 0.0;
  } else {
    bleu.bp = 1.0;
  }
  // No match at any order: 0 without smoothing (sacreBLEU #141).
  if (std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 0; })) return bleu;

  // exp smoothing (mteval-v13a.pl; Chen & Cherry 2014, method 3): k doubles before each use.
  double k = 1.0;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    if (totals[n] == 0) break;  // This and higher orders keep precision 0, so BLEU is 0.
    if (counts[n] == 0) {
      k *= 2;
      bleu.precisions[n] = 100. / (k * static_cast<double>(totals[n]));
    } else {
      bleu.precisions[n] = 100. * static_cast<double>(counts[n]) / static_cast<double>(totals[n]);
    }
  }
  double log_sum = 0.0;
  for (const double p : bleu.precisions) log_sum += SacreLog(p);
  bleu.score = bleu.bp * std::exp(log_sum / kBleuMaxOrder);
  return bleu;
}

absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hyps,
                                     const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("BLEU: ", hyps.size(), " hypothesis lines but ",
                                                   refs.size(), " reference lines"));
  }
  BleuStatistics stats;
  SegmentCounter counter;
  for (size_t i = 0; i < hyps.size(); ++i) counter.Add(hyps[i], refs[i], &stats);
  return BleuFromStatistics(stats.counts, stats.totals, stats.sys_len, stats.ref_len);
}

std::string FormatBleu(const BleuScore& bleu) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "BLEU = %.2f ", bleu.score);
  return buffer + FormatBleuDetail(bleu);
}

std::string FormatBleuDetail(const BleuScore& bleu) {
  char buffer[64];
  std::string line;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    std::snprintf(buffer, sizeof(buffer), n == 0 ? "%.1f" : "/%.1f", bleu.precisions[n]);
    line += buffer;
  }
  std::snprintf(buffer, sizeof(buffer), " (BP = %.3f ratio = %.3f ", bleu.bp, bleu.ratio());
  line += buffer;
  absl::StrAppend(&line, "hyp_len = ", bleu.sys_len, " ref_len = ", bleu.ref_len, ")");
  return line;
}

}  // namespace deepnet::data
