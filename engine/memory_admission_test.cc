#include "engine/memory_admission.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "models/identity/identity.h"

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

// A reservation taken through a model's gate returns its bytes exactly
// once, whichever of Release, a move or the destructor comes first, and the
// gate says so (to wake waiting queues) each time it does.
TEST(MemoryAdmissionTest, AReservationIsReturnedExactlyOnce) {
  MemoryAdmission a(1000, 0);
  IdentityModel model("m");
  int woken = 0;
  ModelMemoryGate gate(&model, &a, [&] { ++woken; });
  auto take = [&](int64_t bytes) {
    std::optional<MemoryReservation> r = MemoryReservation::TryTake(&gate, bytes);
    EXPECT_TRUE(r.has_value());
    return r.has_value() ? *std::move(r) : MemoryReservation();
  };
  {
    MemoryReservation r = take(300);
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
    MemoryReservation moved;
    {
      MemoryReservation r = take(200);
      moved = std::move(r);
    }  // the moved-from one returns nothing
    EXPECT_EQ(a.Stats().in_flight_bytes, 200);
    EXPECT_EQ(woken, 1);
  }  // the owner's destructor returns it
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  EXPECT_EQ(woken, 2);
  {
    MemoryReservation first = take(100);
    MemoryReservation second = take(100);
    first = std::move(second);  // assigning over a held reservation returns it
    EXPECT_EQ(a.Stats().in_flight_bytes, 100);
    EXPECT_EQ(woken, 3);
  }
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  EXPECT_EQ(woken, 4);
  // Not available: nothing is taken; 0 bytes or no gate: an empty one.
  EXPECT_FALSE(MemoryReservation::TryTake(&gate, 1001).has_value());
  EXPECT_EQ(a.Stats().in_flight_bytes, 0);
  std::optional<MemoryReservation> none = MemoryReservation::TryTake(&gate, 0);
  ASSERT_TRUE(none.has_value());
  none->Release();
  EXPECT_TRUE(MemoryReservation::TryTake(nullptr, 50).has_value());
  EXPECT_EQ(woken, 4);
}

}  // namespace
}  // namespace infer
