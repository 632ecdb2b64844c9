// Packing a padded id matrix: the kept tokens, offsets, token types, and the
// two ways of numbering positions (by column, or within the sequence).
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

TEST(PackedSequencesTest, ByOrderALeftPaddedOrHoleyRowPacksAsTheUnpaddedOne) {
  // XLM-R and MPNet count positions over the real tokens: however a row is
  // padded, it packs to the same buffer as the row without padding.
  const std::vector<int64_t> padded = {0, 0, 7, 8, 5, 0, 6, 9};
  const std::vector<int64_t> padded_mask = {0, 0, 1, 1, 1, 0, 1, 1};
  const std::vector<int64_t> plain = {7, 8, 0, 5, 6, 9};
  const std::vector<int64_t> plain_mask = {1, 1, 0, 1, 1, 1};
  const PackedSequences a(padded.data(), padded_mask.data(), 2, 4, nullptr, true);
  const PackedSequences b(plain.data(), plain_mask.data(), 2, 3, nullptr, true);
  EXPECT_EQ(Positions(a.view()), (std::vector<int32_t>{0, 1, 0, 1, 2}));
  EXPECT_EQ(Positions(a.view()), Positions(b.view()));
  EXPECT_EQ(Ids(a.view()), Ids(b.view()));
  EXPECT_EQ(Offsets(a.view()), Offsets(b.view()));
  EXPECT_EQ(a.view().width, 3);  // 1 + the largest position, not the padded row's length
  EXPECT_EQ(a.view().longest, 3);
}

}  // namespace
}  // namespace infer
