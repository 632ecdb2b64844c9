#include "models/text/wordpiece.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace infer {
namespace {

struct Range {
  char32_t lo, hi;
};

bool InRanges(char32_t c, const Range* ranges, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (c >= ranges[i].lo && c <= ranges[i].hi) return true;
  }
  return false;
}

// Unicode punctuation (categories Pc Pd Ps Pe Pi Pf Po) outside ASCII.
constexpr Range kPunctuation[] = {
    {0x00A1, 0x00A1}, {0x00A7, 0x00A7}, {0x00AB, 0x00AB}, {0x00B6, 0x00B7}, {0x00BB, 0x00BB},
    {0x00BF, 0x00BF}, {0x037E, 0x037E}, {0x0387, 0x0387}, {0x055A, 0x055F}, {0x0589, 0x058A},
    {0x05BE, 0x05BE}, {0x05C0, 0x05C0}, {0x05C3, 0x05C3}, {0x05C6, 0x05C6}, {0x05F3, 0x05F4},
    {0x0609, 0x060A}, {0x060C, 0x060D}, {0x061B, 0x061B}, {0x061E, 0x061F}, {0x066A, 0x066D},
    {0x06D4, 0x06D4}, {0x0964, 0x0965}, {0x0970, 0x0970}, {0x0E4F, 0x0E4F}, {0x0E5A, 0x0E5B},
    {0x2010, 0x2027}, {0x2030, 0x2043}, {0x2045, 0x2051}, {0x2053, 0x205E}, {0x207D, 0x207E},
    {0x208D, 0x208E}, {0x2308, 0x230B}, {0x2329, 0x232A}, {0x2768, 0x2775}, {0x27C5, 0x27C6},
    {0x27E6, 0x27EF}, {0x2983, 0x2998}, {0x29D8, 0x29DB}, {0x29FC, 0x29FD}, {0x2CF9, 0x2CFC},
    {0x2CFE, 0x2CFF}, {0x2E00, 0x2E2E}, {0x2E30, 0x2E4F}, {0x3001, 0x3003}, {0x3008, 0x3011},
    {0x3014, 0x301F}, {0x3030, 0x3030}, {0x303D, 0x303D}, {0x30A0, 0x30A0}, {0x30FB, 0x30FB},
    {0xFE10, 0xFE19}, {0xFE30, 0xFE52}, {0xFE54, 0xFE61}, {0xFE63, 0xFE63}, {0xFE68, 0xFE68},
    {0xFE6A, 0xFE6B}, {0xFF01, 0xFF03}, {0xFF05, 0xFF0A}, {0xFF0C, 0xFF0F}, {0xFF1A, 0xFF1B},
    {0xFF1F, 0xFF20}, {0xFF3B, 0xFF3D}, {0xFF3F, 0xFF3F}, {0xFF5B, 0xFF5B}, {0xFF5D, 0xFF5D},
    {0xFF5F, 0xFF65},
};

// Space separators (Zs) besides ' '.
constexpr Range kSpaces[] = {{0x00A0, 0x00A0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                             {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

// Control (Cc) and format (Cf) characters, which BERT drops (\t \n \r are
// whitespace instead).
constexpr Range kControl[] = {
    {0x0000, 0x0008}, {0x000B, 0x000C}, {0x000E, 0x001F}, {0x007F, 0x009F},
    {0x00AD, 0x00AD}, {0x0600, 0x0605}, {0x061C, 0x061C}, {0x06DD, 0x06DD},
    {0x070F, 0x070F}, {0x180E, 0x180E}, {0x200B, 0x200F}, {0x202A, 0x202E},
    {0x2060, 0x2064}, {0x2066, 0x206F}, {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}};

// CJK ideographs, which BERT treats as words of their own.
constexpr Range kCjk[] = {{0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF},
                          {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F}, {0x2B820, 0x2CEAF},
                          {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F}};

bool IsPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  return InRanges(c, kPunctuation, std::size(kPunctuation));
}
bool IsWhitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
         InRanges(c, kSpaces, std::size(kSpaces));
}
bool IsControl(char32_t c) { return InRanges(c, kControl, std::size(kControl)); }
bool IsCjk(char32_t c) { return InRanges(c, kCjk, std::size(kCjk)); }

char32_t ToLower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c >= 0x0100 && c <= 0x0137) return c | 1;
  if (c >= 0x0139 && c <= 0x0148) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x014A && c <= 0x0177) return c | 1;
  if (c == 0x0178) return 0x00FF;
  if (c >= 0x0179 && c <= 0x017E) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x0391 && c <= 0x03A9 && c != 0x03A2) return c + 32;  // Greek
  if (c >= 0x0410 && c <= 0x042F) return c + 32;                 // Cyrillic
  if (c >= 0x0400 && c <= 0x040F) return c + 80;
  return c;
}

// The base letter of a lower-case Latin-1 / Latin Extended-A letter with a
// diacritic (its NFD form minus combining marks), or 0 when it has none.
char32_t StripAccent(char32_t c) {
  static const struct {
    char32_t from, to;
  } kMap[] = {
      {0xE0, 'a'},  {0xE1, 'a'},  {0xE2, 'a'},  {0xE3, 'a'},  {0xE4, 'a'},  {0xE5, 'a'},
      {0xE7, 'c'},  {0xE8, 'e'},  {0xE9, 'e'},  {0xEA, 'e'},  {0xEB, 'e'},  {0xEC, 'i'},
      {0xED, 'i'},  {0xEE, 'i'},  {0xEF, 'i'},  {0xF1, 'n'},  {0xF2, 'o'},  {0xF3, 'o'},
      {0xF4, 'o'},  {0xF5, 'o'},  {0xF6, 'o'},  {0xF9, 'u'},  {0xFA, 'u'},  {0xFB, 'u'},
      {0xFC, 'u'},  {0xFD, 'y'},  {0xFF, 'y'},  {0x101, 'a'}, {0x103, 'a'}, {0x105, 'a'},
      {0x107, 'c'}, {0x109, 'c'}, {0x10B, 'c'}, {0x10D, 'c'}, {0x10F, 'd'}, {0x113, 'e'},
      {0x115, 'e'}, {0x117, 'e'}, {0x119, 'e'}, {0x11B, 'e'}, {0x11D, 'g'}, {0x11F, 'g'},
      {0x121, 'g'}, {0x123, 'g'}, {0x125, 'h'}, {0x129, 'i'}, {0x12B, 'i'}, {0x12D, 'i'},
      {0x12F, 'i'}, {0x135, 'j'}, {0x137, 'k'}, {0x13A, 'l'}, {0x13C, 'l'}, {0x13E, 'l'},
      {0x144, 'n'}, {0x146, 'n'}, {0x148, 'n'}, {0x14D, 'o'}, {0x14F, 'o'}, {0x151, 'o'},
      {0x155, 'r'}, {0x157, 'r'}, {0x159, 'r'}, {0x15B, 's'}, {0x15D, 's'}, {0x15F, 's'},
      {0x161, 's'}, {0x163, 't'}, {0x165, 't'}, {0x169, 'u'}, {0x16B, 'u'}, {0x16D, 'u'},
      {0x16F, 'u'}, {0x171, 'u'}, {0x173, 'u'}, {0x175, 'w'}, {0x177, 'y'}, {0x17A, 'z'},
      {0x17C, 'z'}, {0x17E, 'z'},
  };
  for (const auto& m : kMap) {
    if (m.from == c) return m.to;
  }
  return 0;
}

// Decodes UTF-8; false on malformed input.
bool DecodeUtf8(absl::string_view s, std::u32string* out) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < len; ++k) {
      const unsigned char cb = static_cast<unsigned char>(s[i + k]);
      if ((cb >> 6) != 0x2) return false;
      c = (c << 6) | (cb & 0x3F);
    }
    const char32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    out->push_back(c);
    i += len;
  }
  return true;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string ToUtf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

// BERT's basic tokenizer over decoded text: the words.
std::vector<std::u32string> Words(const std::u32string& text, bool lower_case) {
  std::vector<std::u32string> words;
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      flush();
      continue;
    }
    if (IsCjk(c)) {
      flush();
      words.push_back(std::u32string(1, c));
      continue;
    }
    if (lower_case) {
      if (c >= 0x0300 && c <= 0x036F) continue;  // combining marks
      if (c == 0x0130) {                         // İ lowers to i + combining dot
        word.push_back('i');
        continue;
      }
      c = ToLower(c);
      if (const char32_t base = StripAccent(c); base != 0) c = base;
    }
    if (IsPunctuation(c)) {
      flush();
      words.push_back(std::u32string(1, c));
      continue;
    }
    word.push_back(c);
  }
  flush();
  return words;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromVocabFile(
    const std::string& path, const Options& options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read vocabulary ", path));
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    tokens.push_back(line);
  }
  absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> t = FromVocab(std::move(tokens), options);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromVocab(
    std::vector<std::string> tokens, const Options& options) {
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer(std::move(tokens), options));
  for (size_t i = 0; i < t->tokens_.size(); ++i) {
    if (!t->ids_.emplace(t->tokens_[i], static_cast<int64_t>(i)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocabulary token '", t->tokens_[i], "' repeats at line ", i + 1));
    }
  }
  for (auto [name, id] : {std::pair{"[CLS]", &t->cls_}, std::pair{"[SEP]", &t->sep_},
                          std::pair{"[UNK]", &t->unk_}, std::pair{"[PAD]", &t->pad_}}) {
    auto it = t->ids_.find(name);
    if (it == t->ids_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary has no ", name, " token"));
    }
    *id = it->second;
  }
  return t;
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> tokens, const Options& options)
    : options_(options), tokens_(std::move(tokens)) {}

absl::StatusOr<std::vector<std::string>> WordPieceTokenizer::BasicTokenize(
    absl::string_view text) const {
  std::u32string decoded;
  if (!DecodeUtf8(text, &decoded)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<std::string> out;
  for (const std::u32string& w : Words(decoded, options_.lower_case)) out.push_back(ToUtf8(w));
  return out;
}

void WordPieceTokenizer::WordPieces(const std::u32string& word, std::vector<int64_t>* ids) const {
  if (static_cast<int>(word.size()) > options_.max_chars_per_word) {
    ids->push_back(unk_);
    return;
  }
  std::vector<int64_t> pieces;
  size_t start = 0;
  while (start < word.size()) {
    int64_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      std::string piece = start > 0 ? "##" : "";
      piece += ToUtf8(word.substr(start, end - start));
      if (auto it = ids_.find(piece); it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // no piece matches: the whole word is unknown
      ids->push_back(unk_);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  ids->insert(ids->end(), pieces.begin(), pieces.end());
}

absl::StatusOr<std::vector<int64_t>> WordPieceTokenizer::Encode(absl::string_view text) const {
  std::u32string decoded;
  if (!DecodeUtf8(text, &decoded)) return absl::InvalidArgumentError("text is not valid UTF-8");
  std::vector<int64_t> ids = {cls_};
  for (const std::u32string& w : Words(decoded, options_.lower_case)) WordPieces(w, &ids);
  ids.push_back(sep_);
  return ids;
}

}  // namespace infer
