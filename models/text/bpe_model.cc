// Byte-pair encoding, as Hugging Face `tokenizers`' BPE model does it: a
// piece starts as one symbol per character (unknown characters become the
// unknown token, fused or not, or their bytes with byte_fallback), then the
// adjacent pair of lowest merge rank is merged, leftmost first, until no
// pair has a merge.
#include <nlohmann/json.hpp>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/text/json_fields.h"
#include "models/text/token_model.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

uint64_t PairKey(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

struct Merge {
  uint32_t rank;
  uint32_t new_id;
};

class BpeModel final : public TokenModel {
 public:
  struct Options {
    std::optional<std::string> unk;
    std::optional<std::string> prefix;
    std::optional<std::string> suffix;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
  };

  BpeModel(Vocab vocab, absl::flat_hash_map<uint64_t, Merge> merges, Options o,
           std::optional<int32_t> unk_id)
      : vocab_(std::move(vocab)), merges_(std::move(merges)), o_(std::move(o)), unk_id_(unk_id) {
    FindByteTokens(vocab_, byte_ids_);
  }

  void Tokenize(absl::string_view piece, std::vector<Token>* out) const override {
    if (piece.empty()) return;
    if (o_.ignore_merges) {
      if (std::optional<int32_t> id = vocab_.Find(piece)) {
        out->push_back({*id, std::string(piece), {0, static_cast<uint32_t>(piece.size())}});
        return;
      }
    }
    std::vector<Symbol> word = Symbols(piece);
    MergeAll(&word);
    uint32_t offset = 0;
    for (const Symbol& s : word) {
      if (s.len == 0) continue;
      const std::string* value = vocab_.Token(static_cast<int32_t>(s.id));
      out->push_back({static_cast<int32_t>(s.id),
                      value != nullptr ? *value : std::string(),
                      {offset, offset + s.len}});
      offset += s.len;
    }
  }

  int64_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> TokenToId(absl::string_view t) const override { return vocab_.Find(t); }
  const std::string* IdToToken(int32_t id) const override { return vocab_.Token(id); }

 private:
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // bytes of the piece it covers; 0 once merged into its left
  };

  std::vector<Symbol> Symbols(absl::string_view w) const {
    std::vector<Symbol> word;
    word.reserve(w.size());
    auto add = [&word](uint32_t id, uint32_t len) {
      const int32_t n = static_cast<int32_t>(word.size());
      if (n > 0) word.back().next = n;
      word.push_back({id, n - 1, -1, len});
    };
    bool have_unk = false;
    uint32_t unk_len = 0;
    std::string s;
    for (size_t i = 0; i < w.size();) {
      const size_t b = i;
      DecodeUtf8(w, &i);
      const uint32_t byte_len = static_cast<uint32_t>(i - b);
      s.clear();
      if (b > 0 && o_.prefix.has_value()) s = *o_.prefix;
      s.append(w.data() + b, byte_len);
      if (i == w.size() && o_.suffix.has_value()) s += *o_.suffix;
      if (std::optional<int32_t> id = vocab_.Find(s)) {
        if (have_unk) {
          add(static_cast<uint32_t>(*unk_id_), unk_len);
          have_unk = false;
        }
        add(static_cast<uint32_t>(*id), byte_len);
        continue;
      }
      if (o_.byte_fallback) {
        bool all = true;
        for (unsigned char c : s) all = all && byte_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : s) add(static_cast<uint32_t>(byte_ids_[c]), 1);
          continue;
        }
      }
      if (unk_id_.has_value()) {
        if (have_unk && o_.fuse_unk) {
          unk_len += byte_len;
        } else {
          if (have_unk) add(static_cast<uint32_t>(*unk_id_), unk_len);
          have_unk = true;
          unk_len = byte_len;
        }
      }
      // Without an unknown token the character is dropped, as the original.
    }
    if (have_unk) add(static_cast<uint32_t>(*unk_id_), unk_len);
    return word;
  }

  void MergeAll(std::vector<Symbol>* word) const {
    std::vector<Symbol>& w = *word;
    struct Candidate {
      uint32_t rank;
      uint32_t pos;
      uint32_t new_id;
      // priority_queue pops the largest: lowest rank, then leftmost.
      bool operator<(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Candidate> queue;
    auto lookup = [this](uint32_t a, uint32_t b) -> const Merge* {
      auto it = merges_.find(PairKey(a, b));
      return it == merges_.end() ? nullptr : &it->second;
    };
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (const Merge* m = lookup(w[i].id, w[i + 1].id)) {
        queue.push({m->rank, static_cast<uint32_t>(i), m->new_id});
      }
    }
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& cur = w[top.pos];
      if (cur.len == 0 || cur.next == -1) continue;
      const Symbol right = w[cur.next];
      const Merge* m = lookup(cur.id, right.id);
      if (m == nullptr || m->new_id != top.new_id) continue;  // stale
      cur.id = top.new_id;
      cur.len += right.len;
      w[cur.next].len = 0;
      cur.next = right.next;
      if (right.next >= 0) w[right.next].prev = static_cast<int32_t>(top.pos);
      if (cur.prev >= 0) {
        if (const Merge* pm = lookup(w[cur.prev].id, cur.id)) {
          queue.push({pm->rank, static_cast<uint32_t>(cur.prev), pm->new_id});
        }
      }
      if (cur.next >= 0) {
        if (const Merge* nm = lookup(cur.id, w[cur.next].id)) {
          queue.push({nm->rank, top.pos, nm->new_id});
        }
      }
    }
  }

  const Vocab vocab_;
  const absl::flat_hash_map<uint64_t, Merge> merges_;
  const Options o_;
  const std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];
};

}  // namespace

absl::StatusOr<std::unique_ptr<TokenModel>> BpeFromJson(const nlohmann::json& j) {
  const std::string type = "BPE";
  Vocab vocab;
  {
    auto it = j.find("vocab");
    if (it == j.end() || !it->is_object()) return FieldError(type, "vocab", "an object");
    vocab.Expect(it->size());
    for (auto entry = it->begin(); entry != it->end(); ++entry) {
      if (!entry.value().is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat("BPE: the id of vocab token \"", entry.key(), "\" is not an integer"));
      }
      if (absl::Status s = vocab.Add(entry.key(), entry.value().get<int64_t>()); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("BPE vocab: ", s.message()));
      }
    }
  }
  if (auto d = j.find("dropout"); d != j.end() && !d->is_null()) {
    if (!d->is_number() || d->get<double>() != 0.0) {
      return absl::InvalidArgumentError(
          "BPE: dropout is refused (it makes encoding random; a served model must be "
          "deterministic)");
    }
  }
  BpeModel::Options o;
  INFER_ASSIGN_OR_RETURN(o.unk, OptionalString(j, type, "unk_token"));
  INFER_ASSIGN_OR_RETURN(o.prefix, OptionalString(j, type, "continuing_subword_prefix"));
  INFER_ASSIGN_OR_RETURN(o.suffix, OptionalString(j, type, "end_of_word_suffix"));
  INFER_ASSIGN_OR_RETURN(o.fuse_unk, OptionalBool(j, type, "fuse_unk", false));
  INFER_ASSIGN_OR_RETURN(o.byte_fallback, OptionalBool(j, type, "byte_fallback", false));
  INFER_ASSIGN_OR_RETURN(o.ignore_merges, OptionalBool(j, type, "ignore_merges", false));
  std::optional<int32_t> unk_id;
  if (o.unk.has_value()) {
    unk_id = vocab.Find(*o.unk);
    if (!unk_id.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE: unk_token \"", *o.unk, "\" is not in the vocabulary"));
    }
  }
  auto list = j.find("merges");
  if (list == j.end() || !list->is_array()) return FieldError(type, "merges", "an array");
  const size_t prefix_len = o.prefix.has_value() ? o.prefix->size() : 0;
  absl::flat_hash_map<uint64_t, Merge> merges;
  merges.reserve(list->size());
  uint32_t rank = 0;
  for (const nlohmann::json& m : *list) {
    std::string a, b;
    if (m.is_string()) {  // "a b", the older form
      const std::string& line = m.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("BPE: merge ", rank, " (\"", line, "\") is not two tokens"));
      }
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("BPE: merge ", rank, " is malformed"));
    }
    std::optional<int32_t> a_id = vocab.Find(a);
    std::optional<int32_t> b_id = vocab.Find(b);
    if (!a_id || !b_id || b.size() < prefix_len) {
      return absl::InvalidArgumentError(absl::StrCat("BPE: merge ", rank, " (\"", a, "\", \"", b,
                                                     "\") names a token not in the vocabulary"));
    }
    const std::string merged = a + b.substr(prefix_len);
    std::optional<int32_t> new_id = vocab.Find(merged);
    if (!new_id) {
      return absl::InvalidArgumentError(absl::StrCat("BPE: merge ", rank, " makes \"", merged,
                                                     "\", which is not in the vocabulary"));
    }
    // A pair given twice keeps its last rank, as the original's map does.
    merges[PairKey(static_cast<uint32_t>(*a_id), static_cast<uint32_t>(*b_id))] = {
        rank, static_cast<uint32_t>(*new_id)};
    ++rank;
  }
  return std::make_unique<BpeModel>(std::move(vocab), std::move(merges), std::move(o), unk_id);
}

}  // namespace infer::text
