#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data/multilingual_stream.h"
#include "train/batch_tensors.h"

namespace deepnet::train {

/// A batch made by the loader thread, with the stream state just after it was drawn: a
/// checkpoint taken after consuming it resumes exactly at the next batch, however far the
/// loader has run ahead.
struct PreparedBatch {
  BatchTensors tensors;  // CPU tensors.
  int64_t pair = 0;
  data::StreamState state_after;
};

/// Runs a MultilingualBatchStream on its own thread and keeps up to `capacity` batches ready
/// in a bounded queue (the loader blocks when it is full), so training does not wait for data
/// in steady state. Pop() is called by the training thread only; the stream belongs to the
/// loader thread from Start() until destruction.
class BatchPrefetcher {
 public:
  // `pack_tokens` > 0 packs every batch (MakeBatch, data.pack_tokens).
  BatchPrefetcher(data::MultilingualBatchStream* stream,
                  std::vector<const std::vector<data::TokenizedExample>*> pairs, SpecialIds ids,
                  size_t capacity, int64_t pack_tokens = 0);
  ~BatchPrefetcher();  // Stops and joins the loader thread.
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  void Start();
  // Blocks until a batch is ready; *waited_s gets the time spent blocked. Rethrows an error
  // raised on the loader thread.
  PreparedBatch Pop(double* waited_s);

 private:
  void Run();

  data::MultilingualBatchStream* stream_;
  std::vector<const std::vector<data::TokenizedExample>*> pairs_;
  SpecialIds ids_;
  size_t capacity_;
  int64_t pack_tokens_ = 0;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<PreparedBatch> queue_;  // Guarded by mu_.
  bool stop_ = false;                // Guarded by mu_.
  std::exception_ptr error_;         // Guarded by mu_.
  std::thread thread_;
};

}  // namespace deepnet::train
