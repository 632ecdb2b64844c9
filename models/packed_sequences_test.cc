// Packing a padded id matrix: the kept tokens, offsets, token types, and the
// two ways of numbering positions (by column, or RoBERTa's, counted over the
// ids that are not the padding id as transformers counts them).
#include "models/packed_sequences.h"

#include <vector>

#include "gtest/gtest.h"

namespace infer {
namespace {

std::vector<int32_t> Positions(const PackedSequencesView& v) {
  return std::vector<int32_t>(v.positions, v.positions + v.tokens);
}
std::vector<int32_t> Ids(const PackedSequencesView& v) {
  return std::vector<int32_t>(v.ids, v.ids + v.tokens);
}
std::vector<int32_t> Offsets(const PackedSequencesView& v) {
  return std::vector<int32_t>(v.offsets, v.offsets + v.rows + 1);
}

TEST(PackedSequencesTest, KeepsMaskedInTokensWithTheirColumnsAsPositions) {
  // Row 0 left-padded, row 1 with a hole, row 2 full.
  const std::vector<int64_t> ids = {0, 0, 7, 8, 5, 0, 6, 9, 1, 2, 3, 4};
  const std::vector<int64_t> mask = {0, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
  const std::vector<int64_t> types = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1};
  const PackedSequences packed(ids.data(), mask.data(), 3, 4, types.data());
  const PackedSequencesView v = packed.view();
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.tokens, 9);
  EXPECT_EQ(Ids(v), (std::vector<int32_t>{7, 8, 5, 6, 9, 1, 2, 3, 4}));
  EXPECT_EQ(Positions(v), (std::vector<int32_t>{2, 3, 0, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(Offsets(v), (std::vector<int32_t>{0, 2, 5, 9}));
  EXPECT_EQ(std::vector<int32_t>(v.types, v.types + v.tokens),
            (std::vector<int32_t>{0, 1, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(v.longest, 4);
  EXPECT_EQ(v.width, 4);
}

TEST(PackedSequencesTest, RobertaPositionsOfARowPaddedWithThePaddingIdAreTheUnpaddedOnes) {
  // RoBERTa, XLM-R, CamemBERT and MPNet count positions over the ids that
  // are not the padding id (here 0): a row padded with it, left or in a
  // hole, packs to the same buffer as the row without padding.
  const std::vector<int64_t> padded = {0, 0, 7, 8, 5, 0, 6, 9};
  const std::vector<int64_t> padded_mask = {0, 0, 1, 1, 1, 0, 1, 1};
  const std::vector<int64_t> plain = {7, 8, 0, 5, 6, 9};
  const std::vector<int64_t> plain_mask = {1, 1, 0, 1, 1, 1};
  const PackedSequences a(padded.data(), padded_mask.data(), 2, 4, nullptr,
                          /*position_padding_id=*/0);
  const PackedSequences b(plain.data(), plain_mask.data(), 2, 3, nullptr,
                          /*position_padding_id=*/0);
  EXPECT_EQ(Positions(a.view()), (std::vector<int32_t>{0, 1, 0, 1, 2}));
  EXPECT_EQ(Positions(a.view()), Positions(b.view()));
  EXPECT_EQ(Ids(a.view()), Ids(b.view()));
  EXPECT_EQ(Offsets(a.view()), Offsets(b.view()));
  EXPECT_EQ(a.view().width, 3);  // 1 + the largest position, not the padded row's length
  EXPECT_EQ(a.view().longest, 3);
}

// transformers' create_position_ids_from_input_ids: positions =
// cumsum(ids != padding) * (ids != padding) + padding, of which the packed
// position is the part past padding + 1. A padding id inside the text takes
// the padding position (-1) and is not counted; a masked token that is not
// the padding id is counted (transformers reads the ids alone).
TEST(PackedSequencesTest, RobertaPositionsAreTransformersCumulativeCount) {
  const int64_t pad = 3;
  const std::vector<int64_t> ids = {5, 3, 7, 3, 3, 8, 4, 9, 2, 6, 3, 1};
  const std::vector<int64_t> mask = {1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0};
  const PackedSequences packed(ids.data(), mask.data(), 2, 6, nullptr, pad);
  // transformers' ids: row 0 {4, 3, 5, 3, 3, 6}, row 1 {4, 5, 6, 7, 3, 8}.
  std::vector<int32_t> want;
  for (int64_t r = 0; r < 2; ++r) {
    int64_t count = 0;
    for (int64_t s = 0; s < 6; ++s) {
      const int64_t i = r * 6 + s;
      const int64_t is_real = ids[i] != pad;
      count += is_real;
      const int64_t transformers_id = count * is_real + pad;
      if (mask[i] == 1) want.push_back(static_cast<int32_t>(transformers_id - (pad + 1)));
    }
  }
  EXPECT_EQ(want, (std::vector<int32_t>{0, -1, 1, -1, -1, 2, 1, 2, 3, -1}));
  EXPECT_EQ(Positions(packed.view()), want);
  EXPECT_EQ(Ids(packed.view()), (std::vector<int32_t>{5, 3, 7, 3, 3, 8, 9, 2, 6, 3}));
  EXPECT_EQ(Offsets(packed.view()), (std::vector<int32_t>{0, 6, 10}));
  EXPECT_EQ(packed.view().width, 4);
}

}  // namespace
}  // namespace infer
