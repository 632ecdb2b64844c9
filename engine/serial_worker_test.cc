#include "engine/serial_worker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/testing/notification.h"

namespace infer {
namespace {

// Tasks run in order, on one thread that is not the poster's; Shutdown runs
// what was posted before returning; later posts run on the caller.
TEST(SerialWorkerTest, RunsInOrderOffTheCallerDrainsAndNeverDrops) {
  std::vector<int> ran;
  std::thread::id worker_thread;
  testing::Notification release;
  SerialWorker w;
  w.Post([&] {
    worker_thread = std::this_thread::get_id();
    release.WaitForNotification();  // the next posts queue up behind this one
  });
  for (int i = 0; i < 5; ++i) w.Post([&ran, i] { ran.push_back(i); });
  release.Notify();
  w.Shutdown();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_NE(worker_thread, std::this_thread::get_id());
  std::thread::id late_thread;
  w.Post([&] { late_thread = std::this_thread::get_id(); });
  EXPECT_EQ(late_thread, std::this_thread::get_id());
  w.Shutdown();  // idempotent
}

}  // namespace
}  // namespace infer
