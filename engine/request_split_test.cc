#include "engine/request_split.h"

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

InferRequest FiveRows() {
  InferRequest r;
  r.model_name = "m";
  r.id = "x";
  r.priority = 2;
  Tensor ids;
  ids.name = "ids";
  ids.dtype = DataType::kInt64;
  ids.shape = {5, 2};
  for (int64_t v = 0; v < 10; ++v) ids.data.append(reinterpret_cast<const char*>(&v), 8);
  Tensor text;
  text.name = "text";
  text.dtype = DataType::kBytes;
  text.shape = {5};
  for (const char* s : {"a", "", "ccc", "dd", "eeeee"}) AppendBytesElement(s, &text.data);
  r.inputs = {ids, text};
  return r;
}

TEST(RequestSplitTest, SplitsEveryInputAlongTheFirstDimension) {
  auto pieces = SplitRequest(FiveRows(), 2);
  ASSERT_THAT(pieces, IsOk());
  ASSERT_EQ(pieces->size(), 3u);
  const std::vector<int64_t> rows = {2, 2, 1};
  const std::vector<std::vector<std::string>> texts = {{"a", ""}, {"ccc", "dd"}, {"eeeee"}};
  for (size_t p = 0; p < 3; ++p) {
    const InferRequest& piece = (*pieces)[p];
    EXPECT_EQ(piece.id, "x");
    EXPECT_EQ(piece.priority, 2);
    EXPECT_EQ(piece.inputs[0].shape, (std::vector<int64_t>{rows[p], 2}));
    EXPECT_EQ(piece.inputs[0].as<int64_t>()[0], static_cast<int64_t>(4 * p));
    auto elements = BytesElements(piece.inputs[1], rows[p], "text");
    ASSERT_THAT(elements, IsOk());
    EXPECT_EQ(std::vector<std::string>(elements->begin(), elements->end()), texts[p]);
  }
}

TEST(RequestSplitTest, JoinConcatenatesInOrderAndChecksThePieces) {
  auto make = [](int64_t rows, float value) {
    InferResponse r;
    Tensor t;
    t.name = "out";
    t.dtype = DataType::kFp32;
    t.shape = {rows, 1};
    for (int64_t i = 0; i < rows; ++i) t.data.append(reinterpret_cast<const char*>(&value), 4);
    r.outputs.push_back(t);
    return r;
  };
  auto joined = JoinResponses({make(2, 1.0f), make(1, 2.0f)});
  ASSERT_THAT(joined, IsOk());
  EXPECT_EQ(joined->outputs[0].shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(joined->outputs[0].as<float>()[2], 2.0f);
  InferResponse other = make(1, 3.0f);
  other.outputs[0].name = "different";
  EXPECT_THAT(JoinResponses({make(1, 1.0f), other}),
              StatusIs(absl::StatusCode::kInternal, "disagree on output 'out'"));
}

}  // namespace
}  // namespace infer
