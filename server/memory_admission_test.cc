#include "server/memory_admission.h"

#include <gtest/gtest.h>

#include <utility>

namespace infer {
namespace {

TEST(MemoryAdmissionTest, CapacityIsTheBudgetLessHeadroomWeightsAndWorkspaces) {
  MemoryAdmission a(1000, 100);
  a.AddWeights(200);
  a.AddWorkspaces(50);
  EXPECT_EQ(a.Capacity(), 650);
  EXPECT_TRUE(a.TryReserve(600));
  EXPECT_EQ(a.Available(), 50);
  EXPECT_FALSE(a.TryReserve(51));
  a.Release(600);
  EXPECT_EQ(a.Available(), 650);
  EXPECT_EQ(a.Describe(),
            "budget 1000 - headroom 100 - weights 200 - GEMM workspaces 50 = 650 bytes");
  const MemoryAdmissionStats s = a.Stats();
  EXPECT_EQ(s.weight_bytes, 200);
  EXPECT_EQ(s.workspace_bytes, 50);
}

// A reservation returns its bytes exactly once, whichever of Release, a
// move or the destructor comes first, and says so each time it does.
TEST(MemoryAdmissionTest, AReservationIsReturnedExactlyOnce) {
  MemoryAdmission a(1000, 0);
  int woken = 0;
  auto wake = [&] { ++woken; };
  {
    ASSERT_TRUE(a.TryReserve(300));
    MemoryReservation r = MemoryReservation::Adopt(&a, 300, wake);
    EXPECT_EQ(r.bytes(), 300);
    EXPECT_EQ(a.Stats().in_flight_bytes, 300);
    r.Release();
    r.Release();
    EXPECT_EQ(a.Stats().in_flight_bytes, 0);
    EXPECT_EQ(woken, 1);
  }  // the destructor of a released reservation returns nothing
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  EXPECT_EQ(woken, 1);
  {
    ASSERT_TRUE(a.TryReserve(200));
    MemoryReservation moved;
    {
      MemoryReservation r = MemoryReservation::Adopt(&a, 200, wake);
      moved = std::move(r);
    }  // the moved-from one returns nothing
    EXPECT_EQ(a.Stats().in_flight_bytes, 200);
    EXPECT_EQ(woken, 1);
  }  // the owner's destructor returns it
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  EXPECT_EQ(woken, 2);
  {
    ASSERT_TRUE(a.TryReserve(100));
    ASSERT_TRUE(a.TryReserve(100));
    MemoryReservation first = MemoryReservation::Adopt(&a, 100, wake);
    MemoryReservation second = MemoryReservation::Adopt(&a, 100, wake);
    first = std::move(second);  // assigning over a held reservation returns it
    EXPECT_EQ(a.Stats().in_flight_bytes, 100);
    EXPECT_EQ(woken, 3);
  }
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  EXPECT_EQ(woken, 4);
  MemoryReservation none = MemoryReservation::Adopt(&a, 0, wake);  // holds nothing
  none.Release();
  EXPECT_EQ(woken, 4);
}

}  // namespace
}  // namespace infer
