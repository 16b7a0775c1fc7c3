// libFuzzer entry point for the gettext catalogue reader: ParseMo on arbitrary bytes, then the
// plural rule and every clean-up rule on whatever it accepted. Any crash, sanitizer report,
// timeout or out-of-memory is a bug; a returned error is the expected outcome for most inputs.
// Build and run: docs/DATA.md, "Fuzzing".

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/l10n_cleanup.h"
#include "data/mo_catalog.h"
#include "data/plural_forms.h"

namespace {

constexpr uint64_t kCounts[] = {0, 1, 2, 5, 11, 21, 101, 1000000, ~uint64_t{0}};

void EvaluateAll(const deepnet::data::PluralRule& rule) {
  for (uint64_t n : kCounts) (void)rule.FormIndex(n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepnet::data;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The raw bytes as a Plural-Forms value too, so the expression parser sees text directly.
  absl::StatusOr<PluralRule> rule = PluralRule::ParseHeader(bytes.substr(0, 2048));
  if (rule.ok()) EvaluateAll(*rule);

  absl::StatusOr<MoCatalog> catalog = ParseMo(bytes, "fuzz.mo");
  if (!catalog.ok()) return 0;
  EvaluateAll(catalog->plural_rule);
  std::vector<TextPair> pairs;
  CleanupStats stats;
  PairDeduper deduper;
  for (const MoMessage& message : catalog->messages) {
    (void)NormalizeLocale(message.msgid);
    for (const std::string& form : message.msgstr) {
      CleanMessagePair(message.msgid, form, &pairs, &stats);
    }
    if (message.is_plural())
      CleanMessagePair(message.msgid_plural, message.msgstr.back(), &pairs, &stats);
  }
  for (const TextPair& pair : pairs) (void)deduper.Insert(pair.first, pair.second);
  return 0;
}
