#include "models/text/graphemes.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "models/text/unicode.h"
#include "models/text/unicode_tables.h"

namespace infer::text {
namespace {

// A code point's class: its Grapheme_Cluster_Break value combined with
// Extended_Pictographic and Indic_Conjunct_Break, in the order of
// GRAPHEME_CLASSES in make_unicode_tables.py (kGraphemeClassNames).
enum GraphemeClass : uint8_t {
  kOther,
  kCR,
  kLF,
  kControl,
  kExtend,        // Extend, InCB None (U+200C)
  kExtendInCB,    // Extend, InCB=Extend
  kExtendLinker,  // Extend, InCB=Linker
  kZWJ,           // ZWJ, InCB=Extend
  kRegional,      // Regional_Indicator
  kPrepend,
  kSpacingMark,
  kL,
  kV,
  kT,
  kLVT,           // a Hangul syllable: LV or LVT by its index (HangulLV)
  kPictographic,  // Other, Extended_Pictographic
  kConsonant,     // Other, InCB=Consonant
  kClassCount,
};
constexpr const char* kExpectedNames[kClassCount] = {"Other",
                                                     "CR",
                                                     "LF",
                                                     "Control",
                                                     "Extend",
                                                     "Extend+InCB_Extend",
                                                     "Extend+InCB_Linker",
                                                     "ZWJ+InCB_Extend",
                                                     "Regional_Indicator",
                                                     "Prepend",
                                                     "SpacingMark",
                                                     "L",
                                                     "V",
                                                     "T",
                                                     "LVT",
                                                     "Other+ExtPict",
                                                     "Other+InCB_Consonant"};

// (first code point, class) of each run, ascending.
using Runs = std::vector<std::pair<uint32_t, uint32_t>>;

const Runs& Table() {
  static const Runs* runs = [] {
    for (int k = 0; k < kClassCount; ++k) {
      // The generated names must be in this enum's order; a mismatch is a
      // build that mixes a regenerated table with old code.
      if (std::strcmp(tables::kGraphemeClassNames[k], kExpectedNames[k]) != 0) std::abort();
    }
    return new Runs(tables::DecodeRuns(tables::kGraphemeRuns));
  }();
  return *runs;
}

GraphemeClass ClassOf(char32_t c) {
  if (c < 0x20) return c == '\r' ? kCR : c == '\n' ? kLF : kControl;
  if (c < 0x7F) return kOther;
  const Runs& r = Table();
  const auto it = std::upper_bound(r.begin(), r.end(), static_cast<uint32_t>(c),
                                   [](uint32_t v, const auto& run) { return v < run.first; });
  if (it == r.begin()) return kOther;
  return static_cast<GraphemeClass>(std::prev(it)->second);
}

// A Hangul syllable with no final consonant (LV): every 28th from U+AC00.
bool HangulLV(char32_t c) { return (c - 0xAC00) % 28 == 0; }

bool Control(GraphemeClass k) { return k == kCR || k == kLF || k == kControl; }
bool ExtendLike(GraphemeClass k) {  // Grapheme_Cluster_Break=Extend
  return k == kExtend || k == kExtendInCB || k == kExtendLinker;
}

}  // namespace

size_t GraphemeEnd(absl::string_view text, size_t start) {
  size_t i = start;
  char32_t prev_c = DecodeUtf8(text, &i);
  GraphemeClass prev = ClassOf(prev_c);
  // GB9c: 0 outside a conjunct, 1 after a consonant followed only by InCB
  // Extend or Linker characters, 2 once one of those was a Linker.
  int conjunct = prev == kConsonant ? 1 : 0;
  // GB11: 1 after a pictograph and Extend*, 2 when a ZWJ followed that.
  int emoji = prev == kPictographic ? 1 : 0;
  // GB12/13: regional indicators in a row ending at prev.
  int regional = prev == kRegional ? 1 : 0;
  while (i < text.size()) {
    size_t next_i = i;
    const char32_t c = DecodeUtf8(text, &next_i);
    const GraphemeClass k = ClassOf(c);
    bool join;
    if (prev == kCR && k == kLF) {
      join = true;  // GB3
    } else if (Control(prev) || Control(k)) {
      join = false;  // GB4, GB5
    } else if (prev == kL && (k == kL || k == kV || k == kLVT)) {
      join = true;  // GB6
    } else if (((prev == kLVT && HangulLV(prev_c)) || prev == kV) && (k == kV || k == kT)) {
      join = true;  // GB7
    } else if (((prev == kLVT && !HangulLV(prev_c)) || prev == kT) && k == kT) {
      join = true;  // GB8
    } else if (ExtendLike(k) || k == kZWJ || k == kSpacingMark || prev == kPrepend) {
      join = true;  // GB9, GB9a, GB9b
    } else if (conjunct == 2 && k == kConsonant) {
      join = true;  // GB9c
    } else if (emoji == 2 && k == kPictographic) {
      join = true;  // GB11
    } else {
      join = regional % 2 == 1 && k == kRegional;  // GB12, GB13; else GB999
    }
    if (!join) break;
    // The states after c.
    if (k == kConsonant) {
      conjunct = 1;
    } else if (conjunct != 0 && k == kExtendLinker) {
      conjunct = 2;
    } else if (conjunct != 0 && (k == kExtendInCB || k == kZWJ)) {
      // unchanged
    } else {
      conjunct = 0;
    }
    if (k == kPictographic) {
      emoji = 1;
    } else if (emoji == 1 && ExtendLike(k)) {
      // unchanged
    } else {
      emoji = emoji == 1 && k == kZWJ ? 2 : 0;
    }
    regional = k == kRegional ? regional + 1 : 0;
    prev = k;
    prev_c = c;
    i = next_i;
  }
  return i;
}

}  // namespace infer::text
