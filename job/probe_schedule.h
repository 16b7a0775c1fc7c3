#pragma once
// train.probe_schedule: the steps at which the trainer measures the model update ||dF||.
// Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::job {

/// A set of optimiser steps (>= 1) written as comma-separated items:
///   "N"      the single step N;
///   "A-B"    every step from A to B (inclusive);
///   "A:B:S"  A, A+S, A+2S, ... up to B (inclusive);
///   "A::S"   A, A+S, A+2S, ... with no end.
/// Example: "1-9,10:100:10,200::100" probes steps 1..9, every 10th up to 100, then every 100th
/// from 200 on. Blanks around items are ignored. Immutable; safe for concurrent use.
class ProbeSchedule {
 public:
  // Every `every` steps (train.probe_every); 0 probes no step.
  static ProbeSchedule Every(int64_t every);
  // Parses `text`; errors name `field` and the bad item, e.g.
  // "train.probe_schedule: item '5-2': range end 2 is before its start 5" (no prefix when
  // `field` is empty).
  static absl::StatusOr<ProbeSchedule> Parse(const std::string& text,
                                             const std::string& field = "train.probe_schedule");

  bool Contains(int64_t step) const;
  // True when no step is probed.
  bool empty() const { return items_.empty(); }

 private:
  struct Item {
    int64_t first = 0;
    int64_t last = 0;  // < 0: no end.
    int64_t stride = 1;
  };
  std::vector<Item> items_;
};

}  // namespace deepnet::job
