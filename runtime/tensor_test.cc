#include "runtime/tensor.h"

#include <limits>

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::StatusIs;
using ::testing::Eq;

TEST(DataTypeTest, NamesRoundTrip) {
  for (const char* name : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                           "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES"}) {
    std::optional<DataType> t = DataTypeFromName(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(DataTypeName(*t), name);
  }
  EXPECT_FALSE(DataTypeFromName("FLOAT").has_value());
  EXPECT_FALSE(DataTypeFromName("int64").has_value());
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8);
  EXPECT_EQ(DataTypeSize(DataType::kFp16), 2);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0);
}

TEST(ElementCountTest, CountsAndRejectsNegativeDims) {
  EXPECT_THAT(*ElementCount({2, 3, 4}, "x"), Eq(24));
  EXPECT_THAT(*ElementCount({}, "x"), Eq(1));
  EXPECT_THAT(*ElementCount({5, 0, 7}, "x"), Eq(0));
  EXPECT_THAT(ElementCount({2, -1}, "input 'a'"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'a' has negative dimension -1 at index 1"));
}

TEST(ElementCountTest, DetectsOverflow) {
  const int64_t big = int64_t{1} << 32;
  EXPECT_THAT(ElementCount({big, big}, "input 'a'"),
              StatusIs(absl::StatusCode::kInvalidArgument, "overflows a 64-bit element count"));
  // A zero anywhere makes the product zero, even after huge dimensions.
  EXPECT_THAT(*ElementCount({big, big / 2, 0}, "x"), Eq(0));
  // Fits as elements but not as bytes.
  EXPECT_THAT(ByteSize(DataType::kInt64, {std::numeric_limits<int64_t>::max() / 4}, "y"),
              StatusIs(absl::StatusCode::kInvalidArgument, "overflows a 64-bit byte size"));
  EXPECT_THAT(*ByteSize(DataType::kFp32, {3, 5}, "y"), Eq(60));
}

TEST(ShapeToStringTest, AClientShapeOfAnyRankPrintsAtMostEightDimensions) {
  EXPECT_EQ(ShapeToString({2, 128}), "[2,128]");
  EXPECT_EQ(ShapeToString({}), "[]");
  const std::vector<int64_t> deep(1 << 20, 7);
  EXPECT_EQ(ShapeToString(deep), "[7,7,7,7,7,7,7,7,…] (rank 1048576)");
}

}  // namespace
}  // namespace infer
