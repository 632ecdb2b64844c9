#include "runtime/json_parse.h"

#include <string>

#include "gtest/gtest.h"
#include "runtime/quote.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(ParseJsonTest, ParsesWhatNlohmannParses) {
  const std::string text =
      R"({"a": [1, -2, 3.5, "x\u00e9", true, null, {"b": []}], "c": 18446744073709551615})";
  auto v = ParseJson(text, "the body");
  ASSERT_THAT(v, IsOk());
  EXPECT_EQ(*v, nlohmann::json::parse(text));
  EXPECT_TRUE((*v)["c"].is_number_unsigned());
  EXPECT_THAT(ParseJson("17", "the body"), IsOk());
}

TEST(ParseJsonTest, InvalidJsonNamesTheByte) {
  EXPECT_THAT(ParseJson(R"({"a": [1, 2,]})", "the request body"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "the request body is not valid JSON (at byte 13)"));
  EXPECT_THAT(ParseJson("", "the request body"),
              StatusIs(absl::StatusCode::kInvalidArgument, "is not valid JSON (at byte 1)"));
  EXPECT_THAT(ParseJson("{} x", "b"),
              StatusIs(absl::StatusCode::kInvalidArgument, "is not valid JSON"));
}

TEST(ParseJsonTest, DepthUpToTheLimitIsAccepted) {
  EXPECT_THAT(ParseJson(Nested(kMaxJsonDepth), "b"), IsOk());
  EXPECT_THAT(ParseJson(Nested(3), "b", 3), IsOk());
  // Objects count like arrays: {"k": [{"k": 1}]} is depth 3.
  EXPECT_THAT(ParseJson(R"({"k": [{"k": 1}]})", "b", 3), IsOk());
  EXPECT_THAT(ParseJson(R"({"k": [{"k": 1}]})", "b", 2),
              StatusIs(absl::StatusCode::kInvalidArgument, "deeper than 2 levels"));
  // Depth is nesting, not the number of containers.
  std::string wide = "[";
  for (int i = 0; i < 10000; ++i) wide += i == 0 ? "[[]]" : ",[[]]";
  wide += "]";
  EXPECT_THAT(ParseJson(wide, "b", 3), IsOk());
}

TEST(ParseJsonTest, DeeperIsRefusedNamingTheLimit) {
  EXPECT_THAT(ParseJson(Nested(kMaxJsonDepth + 1), "the request body"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "the request body nests arrays and objects deeper than 64 levels "
                       "(the server's limit)"));
  // A million deep: refused at the 65th bracket, never walked. (An
  // unbalanced document is refused for its depth too: nothing past the
  // limit is read.)
  EXPECT_THAT(ParseJson(Nested(1000000), "b"),
              StatusIs(absl::StatusCode::kInvalidArgument, "deeper than 64 levels"));
  EXPECT_THAT(ParseJson(std::string(1000000, '['), "b"),
              StatusIs(absl::StatusCode::kInvalidArgument, "deeper than 64 levels"));
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a":)";
  EXPECT_THAT(ParseJson(objects, "b"),
              StatusIs(absl::StatusCode::kInvalidArgument, "deeper than 64 levels"));
}

TEST(QuoteJsonTest, ContainersAreDescribedNotSerialised) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  EXPECT_EQ(QuoteJson(big), "an array of 100000 values");
  EXPECT_EQ(QuoteJson(nlohmann::json::array({1})), "an array of 1 value");
  EXPECT_EQ(QuoteJson(nlohmann::json::object({{"a", 1}, {"b", 2}})), "an object of 2 members");
  EXPECT_EQ(QuoteJson(nlohmann::json(-3.5)), "-3.5");
  EXPECT_EQ(QuoteJson(nlohmann::json(18446744073709551615ull)), "18446744073709551615");
  EXPECT_EQ(QuoteJson(nlohmann::json(true)), "true");
  EXPECT_EQ(QuoteJson(nlohmann::json(nullptr)), "null");
  EXPECT_EQ(QuoteJson(nlohmann::json("id")), "'id'");
  EXPECT_EQ(QuoteJson(nlohmann::json(std::string(1 << 20, 'a'))),
            "'" + std::string(kQuotePrefixBytes, 'a') + "…' (1048576 bytes)");
}

}  // namespace
}  // namespace infer
