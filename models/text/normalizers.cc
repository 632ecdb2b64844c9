#include "models/text/normalizers.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/text/json_fields.h"
#include "models/text/text_pattern.h"
#include "runtime/status_macros.h"

namespace infer::text {
namespace {

// BERT's definitions: \t \n \r are whitespace, not control characters.
bool BertWhitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c); }

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}

  void Normalize(NormalizedString* s) const override {
    if (clean_text_) {
      s->Filter([](char32_t c) { return !IsBertRemoved(c); });
      s->Map([](char32_t c) { return BertWhitespace(c) ? U' ' : c; });
    }
    if (chinese_) {
      bool any = false;
      const std::string& t = s->get();
      for (size_t i = 0; i < t.size() && !any;) {
        // Every CJK ideograph is past U+3400: three bytes or more.
        if (static_cast<unsigned char>(t[i]) < 0xE0) {
          DecodeUtf8(t, &i);
          continue;
        }
        any = IsChineseChar(DecodeUtf8(t, &i));
      }
      if (any) {
        std::vector<CharChange> dest;
        for (char32_t c : s->Chars()) {
          if (IsChineseChar(c)) {
            dest.push_back({U' ', 0});
            dest.push_back({c, 1});
            dest.push_back({U' ', 1});
          } else {
            dest.push_back({c, 0});
          }
        }
        s->Transform(dest, 0);
      }
    }
    if (strip_accents_) {
      s->Normalize(NormalForm::kNfd);
      s->Filter([](char32_t c) { return !IsMarkNonspacing(c); });
    }
    if (lowercase_) s->Lowercase();
  }

 private:
  const bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void Normalize(NormalizedString* s) const override { s->Normalize(form_); }

 private:
  const NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override { s->Lowercase(); }
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void Normalize(NormalizedString* s) const override {
    s->Filter([](char32_t c) { return !IsCombiningMark(c); });
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(NormalizedString* s) const override {
    if (left_ && right_) {
      s->Strip(true, true);
    } else {
      if (left_) s->Strip(true, false);
      if (right_) s->Strip(false, true);
    }
  }

 private:
  const bool left_, right_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Normalize(NormalizedString* s) const override {
    s->Replace(pattern_.Find(s->get()), content_);
  }

 private:
  const TextPattern pattern_;
  const std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  void Normalize(NormalizedString* s) const override {
    if (!s->empty()) s->Prepend(prepend_);
  }

 private:
  const std::string prepend_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void Normalize(NormalizedString* s) const override {
    for (const auto& p : parts_) p->Normalize(s);
  }

 private:
  const std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& j) {
  INFER_ASSIGN_OR_RETURN(std::string type, ComponentType(j, "normalizer"));
  if (type == "BertNormalizer") {
    INFER_ASSIGN_OR_RETURN(bool clean, OptionalBool(j, type, "clean_text", true));
    INFER_ASSIGN_OR_RETURN(bool chinese, OptionalBool(j, type, "handle_chinese_chars", true));
    INFER_ASSIGN_OR_RETURN(bool lower, OptionalBool(j, type, "lowercase", true));
    // strip_accents: null means "as lowercase".
    INFER_ASSIGN_OR_RETURN(bool strip, OptionalBool(j, type, "strip_accents", lower));
    return std::make_unique<BertNormalizer>(clean, chinese, strip, lower);
  }
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") {
    INFER_ASSIGN_OR_RETURN(bool left, OptionalBool(j, type, "strip_left", true));
    INFER_ASSIGN_OR_RETURN(bool right, OptionalBool(j, type, "strip_right", true));
    return std::make_unique<StripNormalizer>(left, right);
  }
  if (type == "Replace") {
    INFER_ASSIGN_OR_RETURN(TextPattern pattern, TextPatternFromJson(j, type));
    INFER_ASSIGN_OR_RETURN(std::string content, RequiredString(j, type, "content"));
    return std::make_unique<ReplaceNormalizer>(std::move(pattern), std::move(content));
  }
  if (type == "Precompiled") return PrecompiledFromJson(j);
  if (type == "Prepend") {
    INFER_ASSIGN_OR_RETURN(std::string prepend, RequiredString(j, type, "prepend"));
    return std::make_unique<PrependNormalizer>(std::move(prepend));
  }
  if (type == "Sequence") {
    INFER_ASSIGN_OR_RETURN(auto parts,
                           ComponentList<Normalizer>(j, type, "normalizers", NormalizerFromJson));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("normalizer type \"", type, "\" is not supported"));
}

}  // namespace infer::text
