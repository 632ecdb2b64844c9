#include "models/text/hf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/text/json_fields.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

// The largest tokenizer.json read (real ones: MiniLM 0.7 MB, multilingual
// models about 17 MB, Qwen about 11 MB).
constexpr size_t kMaxFileBytes = size_t{256} << 20;

absl::Status InFile(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// Byte offset -> character index, as Python's `tokenizers` converts: the
// character holding the start byte, and for the end the character holding
// it, or the one before the end of the text plus one.
class CharOffsetMap {
 public:
  explicit CharOffsetMap(absl::string_view text) : size_(text.size()) {
    char_of_.resize(text.size());
    size_t c = 0;
    for (size_t i = 0; i < text.size();) {
      const size_t b = i;
      DecodeUtf8(text, &i);
      for (size_t k = b; k < i; ++k) char_of_[k] = static_cast<uint32_t>(c);
      ++c;
    }
  }
  Offsets Convert(Offsets o) const {
    if (o.start >= size_) return o;  // not in the text: left as it is
    const uint32_t start = char_of_[o.start];
    if (o.end < size_) return {start, char_of_[o.end]};
    const uint32_t last = o.end >= 1 && o.end - 1 < size_ ? char_of_[o.end - 1] : start;
    return {start, last + 1};
  }

 private:
  size_t size_;
  std::vector<uint32_t> char_of_;
};

absl::StatusOr<std::vector<AddedToken>> AddedTokensFromJson(const nlohmann::json& j) {
  std::vector<AddedToken> out;
  auto list = j.find("added_tokens");
  if (list == j.end() || list->is_null()) return out;
  if (!list->is_array()) return absl::InvalidArgumentError("\"added_tokens\" is not an array");
  const std::string type = "added_tokens";
  for (const nlohmann::json& t : *list) {
    if (!t.is_object()) return absl::InvalidArgumentError("an added token is not an object");
    AddedToken a;
    INFER_ASSIGN_OR_RETURN(a.content, RequiredString(t, type, "content"));
    INFER_ASSIGN_OR_RETURN(int64_t id, OptionalInt(t, type, "id", -1));
    a.id = static_cast<int32_t>(id);
    INFER_ASSIGN_OR_RETURN(a.single_word, OptionalBool(t, type, "single_word", false));
    INFER_ASSIGN_OR_RETURN(a.lstrip, OptionalBool(t, type, "lstrip", false));
    INFER_ASSIGN_OR_RETURN(a.rstrip, OptionalBool(t, type, "rstrip", false));
    INFER_ASSIGN_OR_RETURN(a.normalized, OptionalBool(t, type, "normalized", true));
    INFER_ASSIGN_OR_RETURN(a.special, OptionalBool(t, type, "special", false));
    out.push_back(std::move(a));
  }
  return out;
}

// How many positions of a text (n1) and of its pair (n2) a truncation keeps,
// as the original decides it, `added` special tokens aside. INVALID_ARGUMENT
// where the original refuses: no room for the special tokens, only_second
// without a pair, or a sequence too short to remove enough from.
using KeptLengths = std::pair<size_t, size_t>;
absl::StatusOr<KeptLengths> Kept(size_t n1, size_t n2, bool is_pair, const Truncation& tr,
                                 size_t added) {
  if (tr.max_length < added) {
    return absl::InvalidArgumentError(absl::StrCat(
        "truncation to ", tr.max_length, " leaves no room for the ", added, " special tokens"));
  }
  const size_t room = tr.max_length - added;
  const size_t total = n1 + n2;
  if (total <= room) return KeptLengths{n1, n2};
  const size_t to_remove = total - room;
  if (tr.strategy == TruncationStrategy::kLongestFirst) {
    if (!is_pair) return KeptLengths{room, 0};
    // The longer is cut first, down to an even share, as the original.
    size_t a = n1, b = n2;
    const bool swap = a > b;
    if (swap) std::swap(a, b);
    b = a > room ? a : std::max(a, room - a);
    if (a + b > room) {
      a = room / 2;
      b = a + room % 2;
    }
    if (swap) std::swap(a, b);
    return KeptLengths{a, b};
  }
  const bool first = tr.strategy == TruncationStrategy::kOnlyFirst;
  if (!first && !is_pair) return absl::InvalidArgumentError("truncation only_second needs a pair");
  const size_t target = first ? n1 : n2;
  if (target <= to_remove) {
    return absl::InvalidArgumentError("the sequence to truncate is too short to meet max_length");
  }
  return first ? KeptLengths{n1 - to_remove, n2} : KeptLengths{n1, n2 - to_remove};
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open tokenizer file ", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than ", kMaxFileBytes >> 20, " MiB"));
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  return FromJson(text, path);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(absl::string_view json,
                                                                   absl::string_view what) {
  INFER_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(json, what));
  return FromDocument(j, what);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromDocument(const nlohmann::json& j,
                                                                       absl::string_view what) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, ": not an object"));
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  auto component = [&](const char* name) -> const nlohmann::json* {
    auto it = j.find(name);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  // Each part from its section (a missing or null section leaves it null),
  // an error naming the file.
  auto load = [&](const char* name, auto from_json, auto* out) -> absl::Status {
    const nlohmann::json* section = component(name);
    if (section == nullptr) return absl::OkStatus();
    auto r = from_json(*section);
    if (!r.ok()) return InFile(what, r.status());
    *out = *std::move(r);
    return absl::OkStatus();
  };
  INFER_RETURN_IF_ERROR(load("normalizer", NormalizerFromJson, &t->normalizer_));
  INFER_RETURN_IF_ERROR(load("pre_tokenizer", PreTokenizerFromJson, &t->pre_tokenizer_));
  INFER_RETURN_IF_ERROR(load("model", TokenModelFromJson, &t->model_));
  if (t->model_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no \"model\""));
  }
  INFER_RETURN_IF_ERROR(load("post_processor", PostProcessorFromJson, &t->post_processor_));
  INFER_RETURN_IF_ERROR(load("decoder", DecoderFromJson, &t->decoder_));
  auto tokens = AddedTokensFromJson(j);
  if (!tokens.ok()) return InFile(what, tokens.status());
  // Ids as the original assigns them on load: a token the model knows
  // keeps the model's id, any other gets the next id after the model's
  // vocabulary (or after the largest added id, when that is larger).
  // A content given twice keeps the id it got first.
  int64_t next_id = t->model_->vocab_size();
  absl::flat_hash_map<std::string, int32_t> given;
  for (AddedToken& a : *tokens) {
    if (a.content.empty()) continue;
    if (auto it = given.find(a.content); it != given.end()) {
      a.id = it->second;
    } else if (std::optional<int32_t> id = t->model_->TokenToId(a.content)) {
      a.id = *id;
    } else {
      a.id = static_cast<int32_t>(next_id++);
    }
    given.emplace(a.content, a.id);
  }
  t->added_ = AddedVocabulary(*std::move(tokens), t->normalizer_.get());
  t->vocab_size_ = t->model_->vocab_size();
  for (const AddedToken& a : t->added_.tokens()) {
    t->vocab_size_ = std::max<int64_t>(t->vocab_size_, int64_t{a.id} + 1);
  }
  // The post-processor's special tokens carry ids of the file's choosing:
  // they count too, so that a model can refuse a tokenizer whose ids its
  // embedding table does not have.
  if (t->post_processor_) {
    t->vocab_size_ = std::max<int64_t>(t->vocab_size_, t->post_processor_->MaxId() + 1);
  }
  // The padding id: the file's padding section, else a conventional pad
  // token, else 0.
  t->pad_id_ = 0;
  if (const nlohmann::json* pad = component("padding"); pad != nullptr && pad->is_object() &&
                                                        pad->contains("pad_id") &&
                                                        (*pad)["pad_id"].is_number_integer()) {
    t->pad_id_ = (*pad)["pad_id"].get<int64_t>();
  } else {
    for (const char* name : {"[PAD]", "<pad>", "<|endoftext|>"}) {
      if (std::optional<int32_t> id = t->TokenToId(name)) {
        t->pad_id_ = *id;
        break;
      }
    }
  }
  return t;
}

std::optional<int32_t> HfTokenizer::TokenToId(absl::string_view token) const {
  if (std::optional<int32_t> id = added_.Find(token)) return id;
  return model_->TokenToId(token);
}

const std::string* HfTokenizer::IdToToken(int32_t id) const {
  if (const std::string* s = added_.TokenString(id)) return s;
  return model_->IdToToken(id);
}

std::string HfTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* token = IdToToken(id);
    if (token == nullptr) continue;
    if (skip_special_tokens && added_.IsSpecial(*token)) continue;
    tokens.push_back(*token);
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  decoder_->DecodeChain(&tokens);
  return absl::StrJoin(tokens, "");
}

Encoding HfTokenizer::EncodeOne(absl::string_view text, int32_t type_id, int8_t sequence_id,
                                bool char_offsets) const {
  Pieces pieces = added_.ExtractAndNormalize(text, normalizer_.get());
  if (pre_tokenizer_) pre_tokenizer_->PreTokenize(&pieces);
  Encoding e;
  std::optional<CharOffsetMap> chars;
  if (char_offsets) chars.emplace(text);
  std::vector<Token> tokens;
  size_t count = 0;
  for (Piece& p : pieces) {
    if (!p.tokens.has_value()) {
      tokens.clear();
      model_->Tokenize(p.normalized.get(), &tokens);
      p.tokens = std::move(tokens);
      tokens = {};
    }
    count += p.tokens->size();
  }
  e.Reserve(count);
  for (Piece& p : pieces) {
    for (Token& tok : *p.tokens) {
      Offsets o = p.normalized.ToOriginal(tok.offsets.start, tok.offsets.end).value_or(tok.offsets);
      if (chars.has_value()) o = chars->Convert(o);
      e.ids.push_back(tok.id);
      e.type_ids.push_back(type_id);
      e.tokens.push_back(std::move(tok.value));
      e.offsets.push_back(o);
      e.special_tokens_mask.push_back(0);
      e.attention_mask.push_back(1);
      e.sequence_ids.push_back(sequence_id);
    }
  }
  return e;
}

absl::StatusOr<Encoding> HfTokenizer::Encode(absl::string_view text,
                                             std::optional<absl::string_view> pair,
                                             const EncodeOptions& options) const {
  if (!ValidUtf8(text) || (pair.has_value() && !ValidUtf8(*pair))) {
    return absl::InvalidArgumentError("text is not valid UTF-8");
  }
  std::vector<Encoding> encodings;
  encodings.push_back(EncodeOne(text, 0, 0, options.char_offsets));
  if (pair.has_value()) encodings.push_back(EncodeOne(*pair, 1, 1, options.char_offsets));
  if (options.truncation.has_value()) {
    const size_t added = post_processor_ && options.add_special_tokens
                             ? post_processor_->AddedTokens(pair.has_value())
                             : 0;
    Encoding* b = pair.has_value() ? &encodings[1] : nullptr;
    INFER_ASSIGN_OR_RETURN(const KeptLengths kept,
                           Kept(encodings[0].size(), b != nullptr ? b->size() : 0, b != nullptr,
                                *options.truncation, added));
    encodings[0].Truncate(kept.first, options.truncation->left);
    if (b != nullptr) b->Truncate(kept.second, options.truncation->left);
  }
  if (post_processor_) post_processor_->Process(&encodings, options.add_special_tokens);
  Encoding out = std::move(encodings[0]);
  for (size_t i = 1; i < encodings.size(); ++i) out.Append(encodings[i]);
  return out;
}

absl::StatusOr<std::vector<PairIds>> HfTokenizer::EncodePairIds(
    absl::string_view first, const std::vector<absl::string_view>& seconds,
    const std::optional<Truncation>& truncation) const {
  if (!ValidUtf8(first)) return absl::InvalidArgumentError("text is not valid UTF-8");
  const Encoding a = EncodeOne(first, 0, 0, /*char_offsets=*/false);
  const size_t added = post_processor_ ? post_processor_->AddedTokens(/*is_pair=*/true) : 0;
  std::vector<PairIds> out;
  out.reserve(seconds.size());
  std::vector<Encoding> encodings(2);
  for (size_t i = 0; i < seconds.size(); ++i) {
    const absl::string_view second = seconds[i];
    if (!ValidUtf8(second)) {
      return absl::InvalidArgumentError(absl::StrCat("element ", i, ": text is not valid UTF-8"));
    }
    encodings[1] = EncodeOne(second, 1, 1, /*char_offsets=*/false);
    // Only the part of `first` this pair keeps is copied, as Encode's
    // truncation would leave it.
    size_t keep = a.size();
    if (truncation.has_value()) {
      absl::StatusOr<KeptLengths> kept =
          Kept(a.size(), encodings[1].size(), /*is_pair=*/true, *truncation, added);
      if (!kept.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("element ", i, ": ", kept.status().message()));
      }
      keep = kept->first;
      encodings[1].Truncate(kept->second, truncation->left);
    }
    encodings[0] = a.Slice(truncation.has_value() && truncation->left ? a.size() - keep : 0, keep);
    if (post_processor_) post_processor_->Process(&encodings, /*add_special_tokens=*/true);
    PairIds ids;
    ids.ids.reserve(encodings[0].size() + encodings[1].size());
    ids.type_ids.reserve(ids.ids.capacity());
    for (const Encoding& e : encodings) {
      ids.ids.insert(ids.ids.end(), e.ids.begin(), e.ids.end());
      ids.type_ids.insert(ids.type_ids.end(), e.type_ids.begin(), e.type_ids.end());
    }
    out.push_back(std::move(ids));
    encodings.resize(2);  // Process may have changed their number
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::EncodeIds(
    absl::string_view text, const std::optional<Truncation>& truncation) const {
  if (!ValidUtf8(text)) return absl::InvalidArgumentError("text is not valid UTF-8");
  Pieces pieces = added_.ExtractAndNormalize(text, normalizer_.get());
  if (pre_tokenizer_) pre_tokenizer_->PreTokenize(&pieces);
  std::vector<int32_t> ids;
  std::vector<Token> tokens;
  for (Piece& p : pieces) {
    if (p.tokens.has_value()) {
      for (const Token& t : *p.tokens) ids.push_back(t.id);
      continue;
    }
    tokens.clear();
    model_->Tokenize(p.normalized.get(), &tokens);
    for (const Token& t : tokens) ids.push_back(t.id);
  }
  if (truncation.has_value()) {
    const size_t added = post_processor_ ? post_processor_->AddedTokens(false) : 0;
    INFER_ASSIGN_OR_RETURN(const KeptLengths kept,
                           Kept(ids.size(), 0, /*is_pair=*/false, *truncation, added));
    if (truncation->left) {
      ids.erase(ids.begin(), ids.end() - kept.first);
    } else {
      ids.resize(kept.first);
    }
  }
  if (post_processor_) post_processor_->ProcessIds(&ids);
  return ids;
}

}  // namespace infer::text
