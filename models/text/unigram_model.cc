// The Unigram model (SentencePiece's), as Hugging Face `tokenizers` runs it:
// the segmentation of a piece with the highest total score (Viterbi over
// every vocabulary entry that starts at each character), a character no
// entry covers alone scored as unknown (the lowest score minus 10), runs of
// unknown characters fused into one unknown token, which byte_fallback
// spells as its bytes (<0xNN>) when the vocabulary has them.
//
// Written here rather than run through libsentencepiece: the model is a
// short dynamic programme, and its ties, unknown fusing and byte fallback
// must follow `tokenizers` exactly (the tests compare with it); the
// vocabulary comes from tokenizer.json either way.
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "models/text/json_fields.h"
#include "models/text/token_model.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

constexpr double kUnknownPenalty = 10.0;

class UnigramModel final : public TokenModel {
 public:
  UnigramModel(Vocab vocab, std::vector<double> scores, int32_t unk_id, bool byte_fallback)
      : vocab_(std::move(vocab)), scores_(std::move(scores)), unk_id_(unk_id),
        byte_fallback_(byte_fallback) {
    min_score_ = std::numeric_limits<double>::infinity();
    for (double s : scores_) min_score_ = std::min(min_score_, s);
    // A byte trie of the pieces: edges keyed by (node, byte).
    nodes_ = 1;
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      const std::string* piece = vocab_.Token(id);
      if (piece == nullptr || piece->empty()) continue;
      uint32_t at = 0;
      for (size_t k = 0; k < piece->size(); ++k) {
        const uint64_t key = Edge(at, static_cast<uint8_t>((*piece)[k]));
        auto it = edges_.find(key);
        if (it == edges_.end()) {
          it = edges_.emplace(key, Node{nodes_++, -1}).first;
        }
        at = it->second.next;
        if (k + 1 == piece->size()) it->second.id = id;
      }
    }
    FindByteTokens(vocab_, byte_ids_);
  }

  void Tokenize(absl::string_view s, std::vector<Token>* out) const override {
    if (s.empty()) return;
    const double unk_score = min_score_ - kUnknownPenalty;
    struct Best {
      int32_t id = 0;
      double score = 0;
      int64_t start = -1;  // -1: not reached
    };
    std::vector<Best> best(s.size() + 1);
    size_t start = 0;
    while (start < s.size()) {
      const double here = best[start].score;
      size_t next = start;
      DecodeUtf8(s, &next);
      const size_t char_len = next - start;
      bool single = false;
      uint32_t at = 0;
      // Every piece that starts here, shortest first.
      for (size_t i = start; i < s.size(); ++i) {
        auto it = edges_.find(Edge(at, static_cast<uint8_t>(s[i])));
        if (it == edges_.end()) break;
        at = it->second.next;
        const int32_t id = it->second.id;
        if (id < 0) continue;
        Best& target = best[i + 1];
        const double candidate = here + scores_[id];
        if (target.start < 0 || candidate > target.score) {
          target = {id, candidate, static_cast<int64_t>(start)};
        }
        if (i + 1 - start == char_len) single = true;
      }
      if (!single) {
        Best& target = best[next];
        const double candidate = here + unk_score;
        if (target.start < 0 || candidate > target.score) {
          target = {unk_id_, candidate, static_cast<int64_t>(start)};
        }
      }
      start = next;
    }
    // Back from the end; unknown runs fused.
    std::vector<std::pair<size_t, size_t>> pieces;  // reversed
    size_t end = s.size();
    size_t unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
      const Best& node = best[end];
      const size_t from = static_cast<size_t>(node.start);
      if (node.id == unk_id_) {
        if (!in_unk) unk_end = end;
        in_unk = true;
      } else {
        if (in_unk) pieces.push_back({end, unk_end});
        in_unk = false;
        pieces.push_back({from, end});
      }
      end = from;
    }
    if (in_unk) pieces.push_back({0, unk_end});
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      const absl::string_view piece = s.substr(it->first, it->second - it->first);
      const Offsets offsets{static_cast<uint32_t>(it->first), static_cast<uint32_t>(it->second)};
      if (std::optional<int32_t> id = vocab_.Find(piece)) {
        out->push_back({*id, std::string(piece), offsets});
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : piece) {
            out->push_back({byte_ids_[c], *vocab_.Token(byte_ids_[c]), offsets});
          }
          continue;
        }
      }
      out->push_back({unk_id_, std::string(piece), offsets});
    }
  }

  int64_t vocab_size() const override { return vocab_.size(); }
  std::optional<int32_t> TokenToId(absl::string_view t) const override { return vocab_.Find(t); }
  const std::string* IdToToken(int32_t id) const override { return vocab_.Token(id); }

 private:
  struct Node {
    uint32_t next;
    int32_t id;  // the piece ending at `next`, or -1
  };
  static uint64_t Edge(uint32_t node, uint8_t byte) { return (uint64_t{node} << 8) | byte; }

  const Vocab vocab_;
  const std::vector<double> scores_;
  const int32_t unk_id_;
  const bool byte_fallback_;
  double min_score_;
  uint32_t nodes_ = 0;
  absl::flat_hash_map<uint64_t, Node> edges_;
  int32_t byte_ids_[256];
};

}  // namespace

absl::StatusOr<std::unique_ptr<TokenModel>> UnigramFromJson(const nlohmann::json& j) {
  const std::string type = "Unigram";
  auto list = j.find("vocab");
  if (list == j.end() || !list->is_array()) return FieldError(type, "vocab", "an array");
  if (list->empty()) return absl::InvalidArgumentError("Unigram: the vocabulary is empty");
  Vocab vocab;
  vocab.Expect(list->size());
  std::vector<double> scores;
  scores.reserve(list->size());
  int64_t id = 0;
  for (const nlohmann::json& entry : *list) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Unigram: vocab entry ", id, " is not [piece, score]"));
    }
    // Refused: the original would score both entries but give the piece
    // the later id.
    std::string piece = entry[0].get<std::string>();
    if (std::optional<int32_t> dup = vocab.Find(piece)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Unigram: piece \"", piece, "\" appears twice (entries ", *dup, " and ",
                       id, ")"));
    }
    if (absl::Status s = vocab.Add(std::move(piece), id); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("Unigram vocab: ", s.message()));
    }
    scores.push_back(entry[1].get<double>());
    ++id;
  }
  // Required here: the original fails each encode that meets an unknown
  // character without it; every real Unigram file has one.
  auto unk = j.find("unk_id");
  if (unk == j.end() || !unk->is_number_integer() || unk->get<int64_t>() < 0 ||
      unk->get<int64_t>() >= id) {
    return FieldError(type, "unk_id", "an id of the vocabulary");
  }
  INFER_ASSIGN_OR_RETURN(bool byte_fallback, OptionalBool(j, type, "byte_fallback", false));
  return std::make_unique<UnigramModel>(std::move(vocab), std::move(scores),
                                        static_cast<int32_t>(unk->get<int64_t>()), byte_fallback);
}

}  // namespace infer::text
