#include "job/probe_schedule.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "job/job_config.h"

namespace deepnet::job {
namespace {

// A step number in [1, SpecCaps::kSteps].
bool ParseStep(absl::string_view text, int64_t* out) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(text.front()))) return false;
  return absl::SimpleAtoi(text, out) && *out >= 1 && *out <= SpecCaps::kSteps;
}

}  // namespace

ProbeSchedule ProbeSchedule::Every(int64_t every) {
  ProbeSchedule s;
  if (every > 0) s.items_.push_back({every, -1, every});
  return s;
}

absl::StatusOr<ProbeSchedule> ProbeSchedule::Parse(const std::string& text,
                                                   const std::string& field) {
  ProbeSchedule s;
  if (absl::StripAsciiWhitespace(text).empty()) return s;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(field, field.empty() ? "" : ": ", "item '",
                                                     item, "': ", why,
                                                     " (items: N, A-B, A:B:S or A::S; steps "
                                                     ">= 1)"));
    };
    if (item.empty()) return bad("empty item");
    Item it;
    const std::vector<absl::string_view> colon = absl::StrSplit(item, ':');
    if (colon.size() == 3) {
      if (!ParseStep(colon[0], &it.first)) return bad("bad start step");
      if (!ParseStep(colon[2], &it.stride)) return bad("bad stride");
      if (absl::StripAsciiWhitespace(colon[1]).empty()) {
        it.last = -1;
      } else if (!ParseStep(colon[1], &it.last)) {
        return bad("bad end step");
      } else if (it.last < it.first) {
        return bad(absl::StrCat("range end ", it.last, " is before its start ", it.first));
      }
    } else if (colon.size() != 1) {
      return bad("a strided range has three parts A:B:S (B may be empty)");
    } else if (const size_t dash = item.find('-'); dash != absl::string_view::npos) {
      if (!ParseStep(item.substr(0, dash), &it.first) ||
          !ParseStep(item.substr(dash + 1), &it.last)) {
        return bad("bad step in range");
      }
      if (it.last < it.first) {
        return bad(absl::StrCat("range end ", it.last, " is before its start ", it.first));
      }
    } else {
      if (!ParseStep(item, &it.first)) return bad("not a step number");
      it.last = it.first;
    }
    s.items_.push_back(it);
  }
  return s;
}

bool ProbeSchedule::Contains(int64_t step) const {
  for (const Item& it : items_) {
    if (step < it.first || (it.last >= 0 && step > it.last)) continue;
    if ((step - it.first) % it.stride == 0) return true;
  }
  return false;
}

}  // namespace deepnet::job
