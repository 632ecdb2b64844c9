// BucketFifo: the waiting tasks of one length bucket, kept so that what the
// batcher does per wake costs the same with 10 or 100,000 tasks waiting.
//
// Design notes and invariants
// - One FIFO per priority level, in arrival order (seq ascending, enqueue
//   time non-decreasing). BatchQueue's order "by urgency, then arrival" is a
//   merge of them: a task that has waited priority_aging counts as level 0,
//   and since a FIFO is in arrival order its aged tasks are a prefix, found
//   by binary search. The merge (Cursor) visits tasks in that order without
//   sorting, at O(levels) per task visited.
// - Removal from the middle (a deadline passed, a cancellation found) leaves
//   a tombstone: the entry stays, without its task, so positions and the
//   seq order hold. Tombstones at the front are popped by Trim; a FIFO whose
//   tombstones outnumber its live tasks is compacted (amortised O(1) per
//   removal, since each removal makes one tombstone).
// - No per-call binary search over a FIFO: each keeps where its aged prefix
//   ends and where the cancellation sweep stands as positions that move
//   forward as time passes and are shifted on Trim; an entry is found again
//   from the Handle Push returned (its absolute position), falling back to a
//   search by seq only after a compaction moved it.
// - Outside BatchQueue::PopBatch the front of every FIFO is live (PopBatch
//   ends with Trim); readers still skip tombstones wherever they walk.
// - Arrival times (Push's `enqueued`) must not decrease, and `now` should
//   not either: if it does, a task may count as aged a little early.
//
// Not thread-safe; header-only (a template over the task type).
#ifndef INFER_BATCHING_BUCKET_FIFO_H_
#define INFER_BATCHING_BUCKET_FIFO_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"

namespace infer {

template <typename TaskT>
class BucketFifo {
 public:
  struct Entry {
    std::unique_ptr<TaskT> task;  // null: a tombstone
    absl::Time enqueued;
    uint64_t seq;  // arrival order, unique across the queue
  };
  using Fifo = std::deque<Entry>;

  explicit BucketFifo(int levels) : fifos_(static_cast<size_t>(levels)) {}

  int levels() const { return static_cast<int>(fifos_.size()); }
  size_t live() const { return live_; }
  bool empty() const { return live_ == 0; }
  // Tasks waiting at `level` (1-based), tombstones included.
  const Fifo& fifo(int level) const { return fifos_[level - 1].entries; }

  // Where an entry was pushed: enough to find it again in O(1) unless a
  // compaction has moved it since.
  struct Handle {
    uint64_t position = 0;  // absolute: pops from the front do not move it
    uint64_t generation = 0;
  };

  // `enqueued` and `seq` must not decrease across calls.
  Handle Push(std::unique_ptr<TaskT> task, int level, absl::Time enqueued, uint64_t seq) {
    Level& l = fifos_[level - 1];
    l.entries.push_back(Entry{std::move(task), enqueued, seq});
    ++live_;
    return Handle{l.base + l.entries.size() - 1, l.generation};
  }

  Entry& at(int level, size_t index) { return fifos_[level - 1].entries[index]; }
  Handle handle(int level, size_t index) const {
    const Level& l = fifos_[level - 1];
    return Handle{l.base + index, l.generation};
  }

  // The live entry of `level` that arrived as `seq` (pushed at `h`); null
  // when it has left.
  Entry* Find(int level, uint64_t seq, Handle h) {
    Level& l = fifos_[level - 1];
    size_t i;
    if (h.generation == l.generation) {
      if (h.position < l.base) return nullptr;  // popped from the front
      i = static_cast<size_t>(h.position - l.base);
    } else {
      i = static_cast<size_t>(
          std::lower_bound(l.entries.begin(), l.entries.end(), seq,
                           [](const Entry& e, uint64_t s) { return e.seq < s; }) -
          l.entries.begin());
    }
    if (i >= l.entries.size() || l.entries[i].seq != seq || l.entries[i].task == nullptr) {
      return nullptr;
    }
    return &l.entries[i];
  }

  // Takes the task out of a live entry of `level`, leaving a tombstone.
  std::unique_ptr<TaskT> Take(int level, Entry* e) {
    --live_;
    ++fifos_[level - 1].dead;
    return std::move(e->task);
  }

  // Pops tombstones from the fronts; compacts a FIFO that is mostly
  // tombstones (keeping its aged and sweep positions on the same entries).
  void Trim() {
    for (Level& l : fifos_) {
      while (!l.entries.empty() && l.entries.front().task == nullptr) {
        l.entries.pop_front();
        --l.dead;
        ++l.base;
        if (l.aged > 0) --l.aged;
        if (l.sweep > 0) --l.sweep;
      }
      if (l.dead > 32 && l.dead * 2 > l.entries.size()) {
        size_t kept = 0, aged = 0, sweep = 0;
        for (size_t i = 0; i < l.entries.size(); ++i) {
          if (i == l.aged) aged = kept;
          if (i == l.sweep) sweep = kept;
          if (l.entries[i].task == nullptr) continue;
          if (kept != i) l.entries[kept] = std::move(l.entries[i]);
          ++kept;
        }
        if (l.aged >= l.entries.size()) aged = kept;
        if (l.sweep >= l.entries.size()) sweep = kept;
        l.entries.resize(kept);
        l.aged = aged;
        l.sweep = sweep;
        l.dead = 0;
        ++l.generation;
      }
    }
  }

  // The earliest arrival still waiting (null when empty). Tombstones at the
  // fronts (only inside BatchQueue::PopBatch) are stepped over.
  const Entry* Oldest() const {
    const Entry* oldest = nullptr;
    for (const Level& l : fifos_) {
      for (const Entry& e : l.entries) {
        if (e.task == nullptr) continue;
        if (oldest == nullptr || e.seq < oldest->seq) oldest = &e;
        break;
      }
    }
    return oldest;
  }

  // Index in fifo(level) of the first entry that has not yet waited `aging`
  // at `now` (entries before it have: they count as level 0). Moves the
  // kept position forward: amortised O(1).
  size_t AgedEnd(int level, absl::Time now, absl::Duration aging) {
    Level& l = fifos_[level - 1];
    l.aged = AgedFrom(l, l.aged, now - aging);
    return l.aged;
  }
  // The same without keeping it (for const callers): O(tasks aged since the
  // last AgedEnd).
  size_t PeekAgedEnd(int level, absl::Time now, absl::Duration aging) const {
    const Level& l = fifos_[level - 1];
    return AgedFrom(l, l.aged, now - aging);
  }

  // Where the cancellation sweep of `level` resumes (an index into
  // fifo(level)); the caller moves it.
  size_t& sweep_position(int level) { return fifos_[level - 1].sweep; }

  // Removes every task, in no particular order.
  void TakeAll(std::vector<std::unique_ptr<TaskT>>* out) {
    for (Level& l : fifos_) {
      for (Entry& e : l.entries) {
        if (e.task != nullptr) out->push_back(std::move(e.task));
      }
      l.base += l.entries.size();
      l.entries.clear();
      l.dead = l.aged = l.sweep = 0;
    }
    live_ = 0;
  }

  // Visits the live tasks in urgency order: aged tasks of every level by
  // arrival, then level 1, level 2, ... each by arrival. Valid while the
  // FIFOs are not pushed to or trimmed (Take is allowed: it leaves the
  // positions alone).
  class Cursor {
   public:
    // `aging` applies only with more than one level.
    Cursor(BucketFifo* fifo, absl::Time now, absl::Duration aging) : q_(fifo) {
      const int n = q_->levels();
      pos_.assign(static_cast<size_t>(n), 0);
      aged_end_.assign(static_cast<size_t>(n), 0);
      if (n > 1) {
        for (int l = 1; l <= n; ++l) aged_end_[l - 1] = q_->AgedEnd(l, now, aging);
      }
    }

    // The next live entry, its level and its urgency (0 when aged); false at
    // the end. Advances past it.
    bool Next(Entry** entry, int* level, int* urgency) {
      const int n = q_->levels();
      int best = -1;
      for (int l = 1; l <= n; ++l) {  // aged first, by arrival
        const Fifo& f = q_->fifos_[l - 1].entries;
        size_t& p = pos_[l - 1];
        while (p < aged_end_[l - 1] && f[p].task == nullptr) ++p;
        if (p < aged_end_[l - 1] && (best < 0 || f[p].seq < q_->fifo(best)[pos_[best - 1]].seq)) {
          best = l;
        }
      }
      *urgency = 0;
      if (best < 0) {
        for (int l = 1; l <= n && best < 0; ++l) {  // then by level
          const Fifo& f = q_->fifos_[l - 1].entries;
          size_t& p = pos_[l - 1];
          while (p < f.size() && f[p].task == nullptr) ++p;
          if (p < f.size()) best = l;
        }
        if (best < 0) return false;
        *urgency = best;
      }
      *entry = &q_->fifos_[best - 1].entries[pos_[best - 1]++];
      *level = best;
      return true;
    }

   private:
    BucketFifo* const q_;
    absl::InlinedVector<size_t, 4> pos_;
    absl::InlinedVector<size_t, 4> aged_end_;
  };

 private:
  struct Level {
    Fifo entries;
    size_t dead = 0;          // tombstones in `entries`
    uint64_t base = 0;        // absolute position of entries.front()
    uint64_t generation = 0;  // compactions so far (they move entries)
    size_t aged = 0;          // entries before it have aged (as last seen)
    size_t sweep = 0;         // where the cancellation sweep resumes
  };
  static size_t AgedFrom(const Level& l, size_t from, absl::Time cutoff) {
    size_t i = std::min(from, l.entries.size());
    while (i < l.entries.size() && l.entries[i].enqueued <= cutoff) ++i;
    return i;
  }
  std::vector<Level> fifos_;
  size_t live_ = 0;
};

}  // namespace infer

#endif  // INFER_BATCHING_BUCKET_FIFO_H_
