// What the BatchQueue tests share (batch_queue_test.cc and
// batch_queue_property_test.cc): a task type with every property the queue
// reads, a memory gate whose available bytes the test controls, and small
// helpers. Test-only.
#ifndef INFER_BATCHING_BATCH_QUEUE_TEST_UTIL_H_
#define INFER_BATCHING_BATCH_QUEUE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "batching/batch_queue.h"

namespace infer::batch_queue_testing {

struct Task {
  int id = 0;
  int64_t rows = 1;
  int64_t len = 1;
  int64_t real = -1;  // real tokens; -1: rows × len (no padding)
  int prio = 1;
  absl::Time due = absl::InfiniteFuture();
  bool gone = false;
  int64_t size() const { return rows; }
  int64_t length() const { return len; }
  int64_t tokens() const { return real >= 0 ? real : rows * len; }
  int priority() const { return prio; }
  absl::Time deadline() const { return due; }
  bool cancelled() const { return gone; }
};

inline std::unique_ptr<Task> MakeTask(int id, int64_t rows = 1, int64_t len = 1, int prio = 1) {
  auto t = std::make_unique<Task>();
  t->id = id;
  t->rows = rows;
  t->len = len;
  t->prio = prio;
  return t;
}

// Peak = tokens computed × bytes_per_token, where a padding model computes
// rows × length and a packing one its real tokens; `available` shrinks as
// batches reserve and grows when the test releases.
class FakeGate final : public MemoryGate {
 public:
  FakeGate(int64_t capacity, int64_t bytes_per_token, bool packs = false)
      : capacity_(capacity), available_(capacity), per_token_(bytes_per_token), packs_(packs) {}
  int64_t PeakBytes(const BatchShape& shape) const override {
    return ComputedTokens(shape) * per_token_;
  }
  int64_t ComputedTokens(const BatchShape& shape) const override {
    return packs_ ? shape.tokens : shape.padded_tokens();
  }
  int64_t AvailableBytes() const override { return available_; }
  int64_t CapacityBytes() const override { return capacity_; }
  void Claim(int64_t bytes, absl::Time since) override {
    claimed_ = bytes;
    claimed_since_ = since;
    ++claims_;
  }
  int64_t releases() const { return releases_; }
  int64_t claimed() const { return claimed_; }
  absl::Time claimed_since() const { return claimed_since_; }
  int64_t claims() const { return claims_; }

 private:
  bool TryReserve(int64_t bytes) override {
    if (bytes > available_) return false;
    available_ -= bytes;
    return true;
  }
  void Release(int64_t bytes) override {
    available_ += bytes;
    ++releases_;
  }

  int64_t capacity_, available_, per_token_;
  bool packs_;
  int64_t releases_ = 0;
  int64_t claimed_ = 0;
  absl::Time claimed_since_;
  int64_t claims_ = 0;
};

inline QueueOptions Options(int64_t max_batch, int64_t delay_us, int64_t max_queue) {
  QueueOptions o;
  o.max_batch_size = max_batch;
  o.max_queue_delay = absl::Microseconds(delay_us);
  o.max_queue_size = max_queue;
  return o;
}

inline std::vector<int> Ids(const std::vector<std::unique_ptr<Task>>& tasks) {
  std::vector<int> ids;
  for (const auto& t : tasks) ids.push_back(t->id);
  return ids;
}
inline std::vector<int> Ids(const BatchQueue<Task>::Batch& batch) { return Ids(batch.tasks); }

}  // namespace infer::batch_queue_testing

#endif  // INFER_BATCHING_BATCH_QUEUE_TEST_UTIL_H_
