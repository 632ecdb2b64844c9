#include "models/text/post_processors.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "models/text/json_fields.h"
#include "models/text/pre_tokenizers.h"
#include "runtime/status_macros.h"

namespace infer::text {

void TrimByteLevelOffsets(Encoding* e, bool add_prefix_space) {
  const char32_t space = ByteToChar(' ');
  auto is_space = [space](char32_t c) { return c == space || IsWhitespace(c); };
  for (size_t i = 0; i < e->size(); ++i) {
    const std::string& token = e->tokens[i];
    std::vector<char32_t> chars;
    for (size_t k = 0; k < token.size();) chars.push_back(DecodeUtf8(token, &k));
    size_t leading = 0;
    while (leading < chars.size() && is_space(chars[leading])) ++leading;
    size_t trailing = 0;
    while (trailing < chars.size() && is_space(chars[chars.size() - 1 - trailing])) ++trailing;
    Offsets& o = e->offsets[i];
    if (leading > 0) {
      const bool first = i == 0 || o.start == 0;
      if (first && add_prefix_space && leading == 1) leading = 0;
      o.start = std::min<uint32_t>(o.start + leading, o.end);
    }
    if (trailing > 0 && o.end >= trailing) {
      o.end = std::max<uint32_t>(o.end - trailing, o.start);
    }
  }
}

namespace {

struct SpecialToken {
  std::string token;
  int32_t id;
};

absl::StatusOr<SpecialToken> PairFromJson(const nlohmann::json& j, const std::string& type,
                                          const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer() || (*it)[1].get<int64_t>() < 0 ||
      (*it)[1].get<int64_t>() >= (int64_t{1} << 24)) {
    return FieldError(type, field, "[token, id] with an id in [0, 2^24)");
  }
  return SpecialToken{(*it)[0].get<std::string>(), (*it)[1].get<int32_t>()};
}

// BERT's [CLS] A [SEP] (B [SEP]), and RoBERTa's <s> A </s> (</s> B </s>).
class ClsSepProcessor final : public PostProcessor {
 public:
  ClsSepProcessor(SpecialToken cls, SpecialToken sep, bool roberta, bool trim, bool prefix)
      : cls_(std::move(cls)),
        sep_(std::move(sep)),
        roberta_(roberta),
        trim_(trim),
        prefix_(prefix) {}

  size_t AddedTokens(bool is_pair) const override { return is_pair ? (roberta_ ? 4 : 3) : 2; }
  int64_t MaxId() const override { return std::max(cls_.id, sep_.id); }

  void ProcessIds(std::vector<int32_t>* ids) const override {
    ids->insert(ids->begin(), cls_.id);
    ids->push_back(sep_.id);
  }

  void Process(std::vector<Encoding>* encodings, bool add_special_tokens) const override {
    if (roberta_) {
      for (Encoding& e : *encodings) {
        if (trim_) TrimByteLevelOffsets(&e, prefix_);
        std::fill(e.type_ids.begin(), e.type_ids.end(), 0);
      }
    }
    if (!add_special_tokens) return;
    for (size_t i = 0; i < encodings->size(); ++i) {
      Encoding& e = (*encodings)[i];
      const int32_t type = roberta_ ? 0 : static_cast<int32_t>(i);
      Encoding out;
      if (i == 0) {
        out.AddSpecial(cls_.id, cls_.token, 0);
      } else if (roberta_) {
        out.AddSpecial(sep_.id, sep_.token, 0);
      }
      out.Append(e);
      out.AddSpecial(sep_.id, sep_.token, type);
      e = std::move(out);
    }
  }

 private:
  const SpecialToken cls_, sep_;
  const bool roberta_, trim_, prefix_;
};

class ByteLevelProcessor final : public PostProcessor {
 public:
  ByteLevelProcessor(bool trim, bool prefix) : trim_(trim), prefix_(prefix) {}
  size_t AddedTokens(bool) const override { return 0; }
  int64_t MaxId() const override { return -1; }
  void ProcessIds(std::vector<int32_t>*) const override {}
  void Process(std::vector<Encoding>* encodings, bool) const override {
    if (!trim_) return;
    for (Encoding& e : *encodings) TrimByteLevelOffsets(&e, prefix_);
  }

 private:
  const bool trim_, prefix_;
};

class TemplateProcessor final : public PostProcessor {
 public:
  struct Item {
    bool special;
    int sequence;      // 0 (A) or 1 (B), for a sequence
    std::string name;  // a special token's key
    int32_t type_id;
  };
  struct Special {
    std::vector<int32_t> ids;
    std::vector<std::string> tokens;
  };

  TemplateProcessor(std::vector<Item> single, std::vector<Item> pair,
                    absl::flat_hash_map<std::string, Special> specials)
      : single_(std::move(single)), pair_(std::move(pair)), specials_(std::move(specials)) {
    // Each item's special token looked up once (the map never changes).
    for (const std::vector<Item>* items : {&single_, &pair_}) {
      std::vector<const Special*>& resolved = items == &single_ ? single_specials_ : pair_specials_;
      for (const Item& item : *items) {
        resolved.push_back(item.special ? &specials_.at(item.name) : nullptr);
      }
    }
  }

  size_t AddedTokens(bool is_pair) const override {
    size_t n = 0;
    for (const Item& item : is_pair ? pair_ : single_) {
      if (item.special) n += specials_.at(item.name).ids.size();
    }
    return n;
  }

  int64_t MaxId() const override {
    int64_t m = -1;
    for (const auto& [name, s] : specials_) {
      for (int32_t id : s.ids) m = std::max<int64_t>(m, id);
    }
    return m;
  }

  void ProcessIds(std::vector<int32_t>* ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids->size() + AddedTokens(false));
    for (size_t i = 0; i < single_.size(); ++i) {
      if (single_[i].special) {
        out.insert(out.end(), single_specials_[i]->ids.begin(), single_specials_[i]->ids.end());
      } else if (single_[i].sequence == 0) {
        out.insert(out.end(), ids->begin(), ids->end());
      }
    }
    *ids = std::move(out);
  }

  void Process(std::vector<Encoding>* encodings, bool add_special_tokens) const override {
    const bool is_pair = encodings->size() > 1;
    const std::vector<Item>& items = is_pair ? pair_ : single_;
    const std::vector<const Special*>& specials = is_pair ? pair_specials_ : single_specials_;
    size_t total = add_special_tokens ? AddedTokens(is_pair) : 0;
    for (const Encoding& e : *encodings) total += e.size();
    Encoding out;
    out.Reserve(total);
    // A sequence named twice in the template is copied the second time
    // (the first use moves it only when no later item names it).
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      if (item.special) {
        if (!add_special_tokens) continue;
        const Special& s = *specials[i];
        for (size_t k = 0; k < s.ids.size(); ++k)
          out.AddSpecial(s.ids[k], s.tokens[k], item.type_id);
        continue;
      }
      if (static_cast<size_t>(item.sequence) >= encodings->size()) continue;
      bool used_later = false;
      for (size_t k = i + 1; k < items.size(); ++k) {
        used_later = used_later || (!items[k].special && items[k].sequence == item.sequence);
      }
      Encoding& e = (*encodings)[item.sequence];
      if (used_later) {
        Encoding copy = e;
        out.AppendMoved(&copy, item.type_id);
      } else {
        out.AppendMoved(&e, item.type_id);
      }
    }
    encodings->assign(1, std::move(out));
  }

 private:
  const std::vector<Item> single_, pair_;
  const absl::flat_hash_map<std::string, Special> specials_;
  std::vector<const Special*> single_specials_, pair_specials_;  // per item; null: a sequence
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  size_t AddedTokens(bool is_pair) const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->AddedTokens(is_pair);
    return n;
  }
  void ProcessIds(std::vector<int32_t>* ids) const override {
    for (const auto& p : parts_) p->ProcessIds(ids);
  }
  void Process(std::vector<Encoding>* encodings, bool add_special_tokens) const override {
    for (const auto& p : parts_) p->Process(encodings, add_special_tokens);
  }
  int64_t MaxId() const override {
    int64_t m = -1;
    for (const auto& p : parts_) m = std::max(m, p->MaxId());
    return m;
  }

 private:
  const std::vector<std::unique_ptr<PostProcessor>> parts_;
};

absl::StatusOr<std::vector<TemplateProcessor::Item>> TemplateFromJson(
    const nlohmann::json& j, const char* field,
    const absl::flat_hash_map<std::string, TemplateProcessor::Special>& specials) {
  const std::string type = "TemplateProcessing";
  auto list = j.find(field);
  if (list == j.end() || !list->is_array()) return FieldError(type, field, "an array");
  std::vector<TemplateProcessor::Item> items;
  for (const nlohmann::json& piece : *list) {
    TemplateProcessor::Item item{};
    const nlohmann::json* body = nullptr;
    if (piece.is_object() && piece.contains("SpecialToken")) {
      item.special = true;
      body = &piece["SpecialToken"];
    } else if (piece.is_object() && piece.contains("Sequence")) {
      body = &piece["Sequence"];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          type, ": an item of \"", field, "\" is neither {\"SpecialToken\"} nor {\"Sequence\"}"));
    }
    if (!body->is_object() || !body->contains("id") || !(*body)["id"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": an item of \"", field, "\" has no string \"id\""));
    }
    INFER_ASSIGN_OR_RETURN(int64_t type_id, OptionalInt(*body, type, "type_id", 0));
    item.type_id = static_cast<int32_t>(type_id);
    const std::string id = (*body)["id"].get<std::string>();
    if (item.special) {
      if (!specials.contains(id)) {
        return absl::InvalidArgumentError(absl::StrCat(
            type, ": \"", field, "\" names special token \"", id, "\", which it does not define"));
      }
      item.name = id;
    } else if (id == "A" || id == "B") {
      item.sequence = id == "A" ? 0 : 1;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": sequence id \"", id, "\" is neither A nor B"));
    }
    items.push_back(std::move(item));
  }
  return items;
}

absl::StatusOr<std::unique_ptr<PostProcessor>> TemplateProcessorFromJson(const nlohmann::json& j) {
  const std::string type = "TemplateProcessing";
  absl::flat_hash_map<std::string, TemplateProcessor::Special> specials;
  auto st = j.find("special_tokens");
  if (st == j.end() || !st->is_object()) return FieldError(type, "special_tokens", "an object");
  for (auto it = st->begin(); it != st->end(); ++it) {
    const nlohmann::json& s = it.value();
    TemplateProcessor::Special special;
    if (!s.is_object() || !s.contains("ids") || !s["ids"].is_array() || !s.contains("tokens") ||
        !s["tokens"].is_array() || s["ids"].size() != s["tokens"].size()) {
      return absl::InvalidArgumentError(absl::StrCat(type, ": special token \"", it.key(),
                                                     "\" needs as many \"ids\" as \"tokens\""));
    }
    for (size_t k = 0; k < s["ids"].size(); ++k) {
      if (!s["ids"][k].is_number_integer() || s["ids"][k].get<int64_t>() < 0 ||
          s["ids"][k].get<int64_t>() >= (int64_t{1} << 24) || !s["tokens"][k].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(type, ": special token \"", it.key(), "\" has a malformed id or token"));
      }
      special.ids.push_back(s["ids"][k].get<int32_t>());
      special.tokens.push_back(s["tokens"][k].get<std::string>());
    }
    specials.emplace(it.key(), std::move(special));
  }
  INFER_ASSIGN_OR_RETURN(auto single, TemplateFromJson(j, "single", specials));
  INFER_ASSIGN_OR_RETURN(auto pair, TemplateFromJson(j, "pair", specials));
  return std::make_unique<TemplateProcessor>(std::move(single), std::move(pair),
                                             std::move(specials));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(const nlohmann::json& j) {
  INFER_ASSIGN_OR_RETURN(std::string type, ComponentType(j, "post_processor"));
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const bool roberta = type == "RobertaProcessing";
    INFER_ASSIGN_OR_RETURN(SpecialToken cls, PairFromJson(j, type, "cls"));
    INFER_ASSIGN_OR_RETURN(SpecialToken sep, PairFromJson(j, type, "sep"));
    INFER_ASSIGN_OR_RETURN(bool trim, OptionalBool(j, type, "trim_offsets", true));
    INFER_ASSIGN_OR_RETURN(bool prefix, OptionalBool(j, type, "add_prefix_space", true));
    return std::make_unique<ClsSepProcessor>(std::move(cls), std::move(sep), roberta, trim, prefix);
  }
  if (type == "ByteLevel") {
    INFER_ASSIGN_OR_RETURN(bool trim, OptionalBool(j, type, "trim_offsets", true));
    INFER_ASSIGN_OR_RETURN(bool prefix, OptionalBool(j, type, "add_prefix_space", true));
    return std::make_unique<ByteLevelProcessor>(trim, prefix);
  }
  if (type == "TemplateProcessing") return TemplateProcessorFromJson(j);
  if (type == "Sequence") {
    INFER_ASSIGN_OR_RETURN(
        auto parts, ComponentList<PostProcessor>(j, type, "processors", PostProcessorFromJson));
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("post_processor type \"", type, "\" is not supported"));
}

}  // namespace infer::text
