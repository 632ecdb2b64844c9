#include "models/checkpoint.h"

#include <string>

#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class CheckpointTest : public ::testing::Test {
 protected:
  // A safetensors file from a JSON header and raw data.
  std::string Safetensors(const std::string& header, const std::string& data,
                          int64_t declared_len = -1) {
    const uint64_t n = declared_len >= 0 ? declared_len : header.size();
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
    return Write("model.safetensors", bytes + header + data);
  }
  std::string Write(const std::string& name, const std::string& content) {
    return dir_.Write(name, content);
  }
  ::infer::testing::TempDir dir_{std::string("ckpt_") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

std::string Floats(std::initializer_list<float> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * 4);
}

TEST_F(CheckpointTest, ReadsF32F16AndBf16) {
  // F16 1.0 = 0x3C00, -2.0 = 0xC000, 2^-24 (subnormal) = 0x0001; BF16 1.5 = 0x3FC0.
  const std::string half("\x00\x3C\x00\xC0\x01\x00", 6);
  const std::string bf("\xC0\x3F", 2);
  const std::string f32 = Floats({1.5f, -2.25f, 3.0f, 4.0f});
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("h":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
      R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[22,24]}})";
  auto t = ReadSafetensors(Safetensors(header, f32 + half + bf));
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->at("a").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t->at("a").values, (std::vector<float>{1.5f, -2.25f, 3.0f, 4.0f}));
  EXPECT_EQ(t->at("h").values, (std::vector<float>{1.0f, -2.0f, 5.9604645e-08f}));
  EXPECT_EQ(t->at("b").values, (std::vector<float>{1.5f}));
}

TEST_F(CheckpointTest, IntegerTensorsAreCheckedAndSkipped) {
  auto t =
      ReadSafetensors(Safetensors(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                                  R"("w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
                                  std::string(16, '\0') + Floats({7})));
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->count("ids"), 0u);
  EXPECT_EQ(t->at("w").values, std::vector<float>{7});
  EXPECT_THAT(
      ReadSafetensors(Safetensors(R"({"ids":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}})",
                                  std::string(16, 'x'))),
      StatusIs(kInvalid, "tensor 'ids' has 16 bytes; its shape and dtype I64 need 24"));
}

TEST_F(CheckpointTest, CorruptFilesGiveClearErrors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_THAT(ReadSafetensors(Write("short", "abc")),
              StatusIs(kInvalid, "shorter than the 8-byte header length"));
  EXPECT_THAT(ReadSafetensors(Safetensors(ok, Floats({1, 2}), 1 << 30)),
              StatusIs(kInvalid, "header length 1073741824 exceeds the file"));
  EXPECT_THAT(ReadSafetensors(Safetensors("{not json", "")),
              StatusIs(kInvalid, "the header is not valid JSON (at byte"));
  EXPECT_THAT(ReadSafetensors(Safetensors("[1]", "")),
              StatusIs(kInvalid, "header is not a JSON object"));
  EXPECT_THAT(ReadSafetensors(Safetensors(std::string(100000, '[') + std::string(100000, ']'), "")),
              StatusIs(kInvalid, "the header nests arrays and objects deeper than 64 levels"));
  EXPECT_THAT(
      ReadSafetensors(Safetensors(R"({"a":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}})",
                                  Floats({1, 2, 3, 4}))),
      StatusIs(kInvalid, "tensor 'a' has dtype C64; supported: F32, F16, BF16"));
  EXPECT_THAT(ReadSafetensors(Safetensors(ok, Floats({1}))),  // truncated data
              StatusIs(kInvalid, "tensor 'a' spans bytes [0, 8) but the data has 4"));
  EXPECT_THAT(ReadSafetensors(Safetensors(
                  R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Floats({1, 2}))),
              StatusIs(kInvalid, "tensor 'a' has 8 bytes; its shape and dtype F32 need 12"));
  EXPECT_THAT(ReadSafetensors(Safetensors(
                  R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", Floats({1, 2}))),
              StatusIs(kInvalid, "not a non-negative integer"));
  EXPECT_THAT(ReadSafetensors(Safetensors(R"({"a":{"dtype":"F32"}})", "")),
              StatusIs(kInvalid, "tensor 'a' needs dtype, shape and two data_offsets"));
  EXPECT_THAT(ReadSafetensors((dir_.path() / "missing").string()),
              StatusIs(absl::StatusCode::kNotFound, "cannot read"));
}

TEST_F(CheckpointTest, ReadsTheRealMiniLmCheckpoint) {
  const std::string dir = ::infer::testing::MiniLmDir();
  if (dir.empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
  auto t = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->at("embeddings.word_embeddings.weight").shape, (std::vector<int64_t>{30522, 384}));
  EXPECT_EQ(t->at("encoder.layer.5.intermediate.dense.weight").shape,
            (std::vector<int64_t>{1536, 384}));
  EXPECT_GE(t->size(), 100u);
}

}  // namespace
}  // namespace infer
