// SerialWorker: one thread that runs posted tasks in order. The engine runs
// out-of-memory retries on one, so they run neither on the pipeline's
// completion thread (which would hold up every later batch's answers) nor
// concurrently with each other (they share one compute stream).
//
// Thread-safe. Shutdown (or the destructor) runs every task already posted,
// then joins; a task posted after Shutdown began runs on the caller's
// thread, so nothing posted is ever dropped.
#ifndef INFER_ENGINE_SERIAL_WORKER_H_
#define INFER_ENGINE_SERIAL_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace infer {

class SerialWorker {
 public:
  SerialWorker() : thread_([this] { Loop(); }) {}
  ~SerialWorker() { Shutdown(); }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        tasks_.push_back(std::move(task));
        cv_.notify_one();
        return;
      }
    }
    task();
  }

  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and drained
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace infer

#endif  // INFER_ENGINE_SERIAL_WORKER_H_
