#include "coordinator/core/metric_point_buffer.h"

#include <algorithm>

namespace deepnet::coordinator {

void MetricPointBuffer::Push(const MetricPoint& point, size_t capacity) {
  points_.push_back(point);
  while (points_.size() > capacity) {
    points_.pop_front();
    ++base_;
  }
}

int64_t MetricPointBuffer::FirstAtStep(int64_t from_step) const {
  for (size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].step >= from_step) return base_ + static_cast<int64_t>(i);
  }
  return end();
}

std::vector<MetricPoint> MetricPointBuffer::From(int64_t cursor, size_t max_points,
                                                 int64_t* next) const {
  std::vector<MetricPoint> out;
  int64_t i = std::max(cursor, base_);
  for (; i < end() && out.size() < max_points; ++i) {
    out.push_back(points_[static_cast<size_t>(i - base_)]);
  }
  *next = std::max(cursor, i);
  return out;
}

}  // namespace deepnet::coordinator
