#include "models/text/token_model.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/text/json_fields.h"
#include "models/text/unicode.h"
#include "runtime/status_macros.h"

namespace infer::text {

absl::Status Vocab::Add(std::string token, int64_t id) {
  // Ids index a table: a file may not make it much larger than itself, nor
  // larger than a vocabulary can sensibly be (2^24; real ones reach 2^18).
  if (id < 0 || id >= max_id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("token \"", token, "\" has id ", id, ", outside [0, ", max_id_, ")"));
  }
  if (static_cast<size_t>(id) < has_.size() && has_[id]) {
    return absl::InvalidArgumentError(absl::StrCat("id ", id, " is given to two tokens"));
  }
  if (ids_.contains(token)) {
    return absl::InvalidArgumentError(absl::StrCat("token \"", token, "\" appears twice"));
  }
  if (static_cast<size_t>(id) >= tokens_.size()) {
    tokens_.resize(id + 1);
    has_.resize(id + 1, false);
  }
  max_bytes_ = std::max(max_bytes_, token.size());
  tokens_[id] = token;
  has_[id] = true;
  ids_.emplace(std::move(token), static_cast<int32_t>(id));
  return absl::OkStatus();
}

void FindByteTokens(const Vocab& vocab, int32_t ids[256]) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    ids[b] = vocab.Find(name).value_or(-1);
  }
}

namespace {

// {"token": id, ...}, as WordPiece and BPE store it.
absl::Status VocabFromObject(const nlohmann::json& j, const std::string& type, Vocab* vocab) {
  auto it = j.find("vocab");
  if (it == j.end() || !it->is_object()) return FieldError(type, "vocab", "an object");
  vocab->Expect(it->size());
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    if (!entry.value().is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": the id of vocab token \"", entry.key(), "\" is not an integer"));
    }
    if (absl::Status s = vocab->Add(entry.key(), entry.value().get<int64_t>()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(type, " vocab: ", s.message()));
    }
  }
  return absl::OkStatus();
}

class WordPieceModel final : public TokenModel {
 public:
  WordPieceModel(Vocab vocab, std::string unk, int32_t unk_id, std::string prefix, size_t max_chars)
      : vocab_(std::move(vocab)),
        unk_(std::move(unk)),
        unk_id_(unk_id),
        prefix_(std::move(prefix)),
        max_chars_(max_chars),
        longest_(2 * kBuckets, 0) {
    for (int64_t id = 0; id < vocab_.size(); ++id) {
      const std::string* t = vocab_.Token(static_cast<int32_t>(id));
      if (t == nullptr || t->empty()) continue;
      Note(0, *t);
      if (t->size() > prefix_.size() &&
          absl::string_view(*t).substr(0, prefix_.size()) == prefix_) {
        Note(1, absl::string_view(*t).substr(prefix_.size()));
      }
    }
  }

  // Greedy longest match first, continuations carrying the prefix; a word
  // with a part that matches nothing, or longer than max_chars characters,
  // is one unknown token.
  void Tokenize(absl::string_view word, std::vector<Token>* out) const override {
    const size_t first = out->size();
    if (CountChars(word) <= max_chars_) {
      std::string candidate;
      size_t start = 0;
      bool bad = false;
      while (start < word.size()) {
        // No token is longer than the longest in the vocabulary: starting
        // there gives the same match and keeps the search linear in the word.
        const size_t max_bytes = vocab_.max_token_bytes();
        size_t limit = max_bytes - (start > 0 ? std::min(prefix_.size(), max_bytes) : 0);
        // Nor than the longest starting with this character: most lookups
        // of a word outside the vocabulary's scripts end here.
        size_t next = start;
        const uint8_t bound =
            longest_[(start > 0 ? kBuckets : 0) + Bucket(DecodeUtf8(word, &next))];
        if (bound == 0) {
          bad = true;
          break;
        }
        if (bound < kUnbounded) limit = std::min<size_t>(limit, bound);
        size_t end = std::min(word.size(), start + limit);
        while (end > start && end < word.size() &&
               (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) {
          --end;  // back to a character boundary
        }
        bool found = false;
        while (start < end) {
          candidate.clear();
          if (start > 0) candidate = prefix_;
          candidate.append(word.data() + start, end - start);
          if (std::optional<int32_t> id = vocab_.Find(candidate)) {
            out->push_back(
                {*id, candidate, {static_cast<uint32_t>(start), static_cast<uint32_t>(end)}});
            found = true;
            break;
          }
          do {
            --end;
          } while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
        }
        if (!found) {
          bad = true;
          break;
        }
        start = end;
      }
      if (!bad) return;
    }
    out->resize(first);
    out->push_back({unk_id_, unk_, {0, static_cast<uint32_t>(word.size())}});
  }

  int64_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> TokenToId(absl::string_view t) const override { return vocab_.Find(t); }
  const std::string* IdToToken(int32_t id) const override { return vocab_.Token(id); }

 private:
  const Vocab vocab_;
  const std::string unk_;
  const int32_t unk_id_;
  // Code points in buckets of 2^16 (a bucket's bound is the largest of its
  // code points': a collision only loosens it).
  static constexpr size_t kBuckets = 1 << 16;
  static constexpr uint8_t kUnbounded = 255;
  static size_t Bucket(char32_t c) { return c & (kBuckets - 1); }
  // Records `t` (whole, or after the prefix) in the longest-token table.
  void Note(int table, absl::string_view t) {
    size_t i = 0;
    const char32_t first = DecodeUtf8(t, &i);
    uint8_t& slot = longest_[table * kBuckets + Bucket(first)];
    slot = std::max<uint8_t>(slot, static_cast<uint8_t>(std::min<size_t>(t.size(), kUnbounded)));
  }

  const std::string prefix_;
  const size_t max_chars_;
  // Per first character, the byte length of the longest token that starts
  // with it (0: none does; kUnbounded: 255 bytes or more): first the whole
  // tokens, then the continuations after the prefix.
  std::vector<uint8_t> longest_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TokenModel>> WordPieceFromJson(const nlohmann::json& j) {
  const std::string type = "WordPiece";
  Vocab vocab;
  INFER_RETURN_IF_ERROR(VocabFromObject(j, type, &vocab));
  INFER_ASSIGN_OR_RETURN(std::optional<std::string> unk, OptionalString(j, type, "unk_token"));
  if (!unk.has_value()) unk = "[UNK]";
  // The original fails each encode that needs the unknown token when the
  // vocabulary lacks it; here such a file is refused once, at load.
  std::optional<int32_t> unk_id = vocab.Find(*unk);
  if (!unk_id.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("WordPiece: unk_token \"", *unk, "\" is not in the vocabulary"));
  }
  INFER_ASSIGN_OR_RETURN(std::optional<std::string> prefix,
                         OptionalString(j, type, "continuing_subword_prefix"));
  INFER_ASSIGN_OR_RETURN(int64_t max_chars, OptionalInt(j, type, "max_input_chars_per_word", 100));
  if (max_chars < 0) return FieldError(type, "max_input_chars_per_word", "non-negative");
  return std::make_unique<WordPieceModel>(std::move(vocab), *unk, *unk_id, prefix.value_or("##"),
                                          static_cast<size_t>(max_chars));
}

absl::StatusOr<std::unique_ptr<TokenModel>> TokenModelFromJson(const nlohmann::json& j) {
  INFER_ASSIGN_OR_RETURN(std::string type, ComponentType(j, "model"));
  if (type == "WordPiece") return WordPieceFromJson(j);
  if (type == "BPE") return BpeFromJson(j);
  if (type == "Unigram") return UnigramFromJson(j);
  return absl::InvalidArgumentError(absl::StrCat("model type \"", type, "\" is not supported"));
}

}  // namespace infer::text
