#include "train/batch_prefetcher.h"

#include <chrono>

namespace deepnet::train {

BatchPrefetcher::BatchPrefetcher(data::MultilingualBatchStream* stream,
                                 std::vector<const std::vector<data::TokenizedExample>*> pairs,
                                 SpecialIds ids, size_t capacity, int64_t pack_tokens)
    : stream_(stream),
      pairs_(std::move(pairs)),
      ids_(ids),
      capacity_(std::max<size_t>(1, capacity)),
      pack_tokens_(pack_tokens) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchPrefetcher::Start() {
  if (!thread_.joinable()) thread_ = std::thread(&BatchPrefetcher::Run, this);
}

void BatchPrefetcher::Run() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        not_full_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
        if (stop_) return;
      }
      // Draw and build outside the lock: the trainer keeps popping meanwhile.
      data::StreamBatch batch = stream_->Next();
      PreparedBatch prepared;
      prepared.tensors = MakeBatch(*pairs_[batch.pair], batch.indices, ids_, torch::kCPU, pack_tokens_);
      prepared.pair = batch.pair;
      prepared.state_after = stream_->state();
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(prepared));
      }
      not_empty_.notify_one();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    not_empty_.notify_all();
  }
}

PreparedBatch BatchPrefetcher::Pop(double* waited_s) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  not_empty_.wait(lock, [&] { return !queue_.empty() || error_ != nullptr; });
  if (queue_.empty() && error_) std::rethrow_exception(error_);
  PreparedBatch batch = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  not_full_.notify_one();
  if (waited_s != nullptr) {
    *waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return batch;
}

}  // namespace deepnet::train
