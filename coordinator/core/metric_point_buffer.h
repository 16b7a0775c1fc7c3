#pragma once
// The latest metric points of a job (StreamMetrics replays them), at most a fixed number: the
// oldest are dropped. Positions are absolute (a cursor stays valid as points are dropped).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "coordinator/core/coordinator_types.h"

namespace deepnet::coordinator {

class MetricPointBuffer {
 public:
  // Appends `point`, dropping the oldest beyond `capacity`.
  void Push(const MetricPoint& point, size_t capacity);
  // Position after the last point.
  int64_t end() const { return base_ + static_cast<int64_t>(points_.size()); }
  // Position of the first retained point with step >= from_step; end() when none.
  int64_t FirstAtStep(int64_t from_step) const;
  // Up to max_points points from `cursor` (or the oldest retained, if dropped); *next is the
  // position after the last one returned (never before cursor).
  std::vector<MetricPoint> From(int64_t cursor, size_t max_points, int64_t* next) const;

 private:
  std::deque<MetricPoint> points_;
  int64_t base_ = 0;  // absolute position of points_.front()
};

}  // namespace deepnet::coordinator
