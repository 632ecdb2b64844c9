// Synthetic checkpoints and FP16 conversion: what the generator writes loads
// back (shapes, config, vocabulary), is seeded, and F16 halves the file while
// keeping the encoder's output.
#include "models/bert/bert_gen.h"

#include <cmath>
#include <filesystem>

#include "models/half.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/encoder_cpu.h"
#include "models/transformer/transformer_weights.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

TEST(HalfTest, RoundTripsAndRoundsToNearestEven) {
  for (float f :
       {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);           // rounds up to infinity
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f), 0x3C00);  // tie: to even (down)
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.8p-10f), 0x3C02);  // tie: to even (up)
  EXPECT_EQ(FloatToHalf(0x1.0p-25f), 0x0000);         // tie below the smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);         // tie between subnormals: to even
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xFC00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  // Every half converts to a float that converts back to itself.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(BertGenTest, GeneratedCheckpointLoadsWithItsShapeAndVocabulary) {
  const ::infer::testing::TempDir tmp("bert_gen_tiny");
  const std::string dir = (tmp.path() / "tiny").string();
  BertGenOptions o;
  o.config = *BertPreset("tiny");
  o.config.vocab_size = 300;
  ASSERT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
  auto w = LoadTransformerWeights(dir);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->spec.hidden_size, 32);
  EXPECT_EQ(w->spec.num_layers, 2);
  EXPECT_EQ(w->layers.size(), 2u);
  EXPECT_EQ(w->word.size(), 300u * 32);
  auto tok = text::LoadFolderTokenizer(dir);
  ASSERT_THAT(tok, IsOk());
  EXPECT_EQ(tok->source, dir + "/vocab.txt");
  EXPECT_EQ(tok->tokenizer->vocab_size(), 300);
  EXPECT_EQ(tok->tokenizer->pad_id(), 0);
  auto ids = tok->tokenizer->EncodeIds("hello, world", std::nullopt);
  ASSERT_THAT(ids, IsOk());
  EXPECT_GE(ids->size(), 4u);  // [CLS] ... [SEP], pieces of known characters
  // Same seed, same weights; another seed, others.
  const std::string again = (tmp.path() / "again").string();
  ASSERT_THAT(GenerateBertCheckpoint(again, o), IsOk());
  EXPECT_EQ(LoadTransformerWeights(again)->layers[1].ffn_in.w, w->layers[1].ffn_in.w);
  o.seed = 2;
  ASSERT_THAT(GenerateBertCheckpoint(again, o), IsOk());
  EXPECT_NE(LoadTransformerWeights(again)->layers[1].ffn_in.w, w->layers[1].ffn_in.w);
}

TEST(BertGenTest, Fp16ConversionHalvesTheFileAndKeepsTheEmbeddings) {
  const ::infer::testing::TempDir tmp("bert_gen_f16");
  const std::string dir = (tmp.path() / "f32").string();
  const std::string half = (tmp.path() / "f16").string();
  BertGenOptions o;
  o.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
  ASSERT_THAT(ConvertCheckpoint(dir, half, "F16"), IsOk());
  const auto f32_size = std::filesystem::file_size(dir + "/model.safetensors");
  const auto f16_size = std::filesystem::file_size(half + "/model.safetensors");
  EXPECT_LT(f16_size, f32_size * 0.52);
  auto a = TransformerEncoderCpu::Load(dir);
  auto b = TransformerEncoderCpu::Load(half);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  const std::vector<int64_t> ids = {2, 40, 41, 99, 3}, mask(5, 1);
  auto ea = (*a)->Encode(ids, mask, 1, 5, true);
  auto eb = (*b)->Encode(ids, mask, 1, 5, true);
  double dot = 0;
  for (size_t i = 0; i < ea->size(); ++i) dot += double{(*ea)[i]} * (*eb)[i];
  EXPECT_GT(dot, 0.9999);
}

TEST(BertGenTest, BadShapesAndPresetsAreRefused) {
  const ::infer::testing::TempDir tmp("bert_gen_bad");
  const std::string x = (tmp.path() / "x").string();
  EXPECT_THAT(BertPreset("gpt"), StatusIs(absl::StatusCode::kInvalidArgument, "known: "));
  BertGenOptions o;
  o.config = *BertPreset("tiny");
  o.config.num_attention_heads = 5;
  EXPECT_THAT(GenerateBertCheckpoint(x, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "divisible"));
  o.config = *BertPreset("tiny");
  o.config.vocab_size = 10;
  EXPECT_THAT(GenerateBertCheckpoint(x, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "minimum of 128"));
  o.config = *BertPreset("tiny");
  o.dtype = "BF16";
  EXPECT_THAT(GenerateBertCheckpoint(x, o),
              StatusIs(absl::StatusCode::kInvalidArgument, "use F32 or F16"));
}

}  // namespace
}  // namespace infer
