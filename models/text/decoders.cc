#include "models/text/decoders.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "models/text/json_fields.h"
#include "models/text/normalized_string.h"
#include "models/text/pre_tokenizers.h"
#include "models/text/text_pattern.h"
#include "runtime/status_macros.h"

namespace infer::text {

std::string Utf8Lossy(absl::string_view bytes) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must fall in.
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
    if (len == 0) {  // not a lead byte: one replacement for it
      out += kReplacement;
      ++i;
      continue;
    }
    // The maximal subpart: the lead byte and the continuation bytes that fit.
    size_t k = 1;
    while (k < static_cast<size_t>(len) && i + k < n) {
      const unsigned char c = p[i + k];
      const bool fits = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!fits) break;
      ++k;
    }
    if (k == static_cast<size_t>(len)) {
      out.append(bytes.data() + i, k);
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return out;
}

namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  // Each token's stand-in characters back to bytes (a token with a
  // character outside the alphabet keeps its own bytes), all as one string.
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& t : *tokens) {
      std::string mine;
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        const int b = CharToByte(DecodeUtf8(t, &i));
        if (b < 0) {
          all = false;
        } else {
          mine.push_back(static_cast<char>(b));
        }
      }
      bytes += all ? mine : t;
    }
    tokens->assign(1, Utf8Lossy(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool prepends)
      : replacement_(replacement), prepends_(prepends) {}
  // The replacement becomes a space, except in the first token of a
  // tokenizer that prepends one, where it is dropped.
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t k = 0; k < tokens->size(); ++k) {
      const std::string& t = (*tokens)[k];
      std::string out;
      for (size_t i = 0; i < t.size();) {
        const char32_t c = DecodeUtf8(t, &i);
        if (c != replacement_) {
          AppendUtf8(c, &out);
        } else if (!(k == 0 && prepends_)) {
          out.push_back(' ');
        }
      }
      (*tokens)[k] = std::move(out);
    }
  }

 private:
  const char32_t replacement_;
  const bool prepends_;
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      if (i != 0) {
        if (absl::StartsWith(t, prefix_)) {
          t.erase(0, prefix_.size());
        } else {
          t.insert(0, " ");
        }
      }
      if (cleanup_) {
        // In this order, one after another, as the original.
        for (const auto& [from, to] :
             std::initializer_list<std::pair<const char*, const char*>>{{" .", "."},
                                                                        {" ?", "?"},
                                                                        {" !", "!"},
                                                                        {" ,", ","},
                                                                        {" ' ", "'"},
                                                                        {" n't", "n't"},
                                                                        {" 'm", "'m"},
                                                                        {" do not", " don't"},
                                                                        {" 's", "'s"},
                                                                        {" 've", "'ve"},
                                                                        {" 're", "'re"}}) {
          t = absl::StrReplaceAll(t, {{from, to}});
        }
      }
    }
  }

 private:
  const std::string prefix_;
  const bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens->size(); ++i) {
      (*tokens)[i] =
          absl::StrReplaceAll((*tokens)[i], {{suffix_, i + 1 == tokens->size() ? "" : " "}});
    }
  }

 private:
  const std::string suffix_;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  // Runs of <0xNN> tokens become the text their bytes spell, or one U+FFFD
  // per byte when they are not valid UTF-8.
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (ValidUtf8(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run.size(); ++k) out.push_back("\xEF\xBF\xBD");
      }
      run.clear();
    };
    for (std::string& t : *tokens) {
      int byte = -1;
      if (t.size() == 6 && absl::StartsWith(t, "<0x") && t[5] == '>') {
        auto hex = [](char c) {
          return c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : -1;
        };
        const int h = hex(t[3]), l = hex(t[4]);
        if (h >= 0 && l >= 0) byte = h * 16 + l;
      }
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    *tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  // Up to `start` leading and `stop` trailing `content` characters removed.
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      std::vector<char32_t> chars;
      for (size_t i = 0; i < t.size();) chars.push_back(DecodeUtf8(t, &i));
      size_t from = 0;
      while (from < start_ && from < chars.size() && chars[from] == content_) ++from;
      size_t to = chars.size();
      while (chars.size() - to < stop_ && to > from && chars[to - 1] == content_) --to;
      std::string out;
      for (size_t i = from; i < to; ++i) AppendUtf8(chars[i], &out);
      t = std::move(out);
    }
  }

 private:
  const char32_t content_;
  const size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(TextPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      if (!ValidUtf8(t)) continue;  // a byte-level piece cut inside a character
      std::string out;
      for (const PatternPiece& p : pattern_.Find(t)) {
        if (p.match) {
          out += content_;
        } else {
          out.append(t, p.start, p.end - p.start);
        }
      }
      t = std::move(out);
    }
  }

 private:
  const TextPattern pattern_;
  const std::string content_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }

 private:
  const std::vector<std::unique_ptr<Decoder>> parts_;
};

absl::StatusOr<char32_t> OneChar(const nlohmann::json& j, const std::string& type,
                                 const char* field) {
  INFER_ASSIGN_OR_RETURN(std::string s, RequiredString(j, type, field));
  size_t i = 0;
  if (s.empty() || !ValidUtf8(s)) return FieldError(type, field, "one character");
  const char32_t c = DecodeUtf8(s, &i);
  if (i != s.size()) return FieldError(type, field, "one character");
  return c;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const nlohmann::json& j) {
  INFER_ASSIGN_OR_RETURN(std::string type, ComponentType(j, "decoder"));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    INFER_ASSIGN_OR_RETURN(char32_t rep, OneChar(j, type, "replacement"));
    INFER_ASSIGN_OR_RETURN(std::optional<std::string> scheme,
                           OptionalString(j, type, "prepend_scheme"));
    INFER_ASSIGN_OR_RETURN(bool add_prefix_space, OptionalBool(j, type, "add_prefix_space", true));
    const bool prepends = scheme.has_value() ? *scheme != "never" : add_prefix_space;
    return std::make_unique<MetaspaceDecoder>(rep, prepends);
  }
  if (type == "WordPiece") {
    INFER_ASSIGN_OR_RETURN(std::optional<std::string> prefix, OptionalString(j, type, "prefix"));
    INFER_ASSIGN_OR_RETURN(bool cleanup, OptionalBool(j, type, "cleanup", true));
    return std::make_unique<WordPieceDecoder>(prefix.value_or("##"), cleanup);
  }
  if (type == "BPEDecoder") {
    INFER_ASSIGN_OR_RETURN(std::optional<std::string> suffix, OptionalString(j, type, "suffix"));
    return std::make_unique<BpeDecoder>(suffix.value_or("</w>"));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    INFER_ASSIGN_OR_RETURN(char32_t content, OneChar(j, type, "content"));
    INFER_ASSIGN_OR_RETURN(int64_t start, OptionalInt(j, type, "start", 0));
    INFER_ASSIGN_OR_RETURN(int64_t stop, OptionalInt(j, type, "stop", 0));
    if (start < 0 || stop < 0) return FieldError(type, "start", "non-negative");
    return std::make_unique<StripDecoder>(content, static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Replace") {
    INFER_ASSIGN_OR_RETURN(TextPattern pattern, TextPatternFromJson(j, type));
    INFER_ASSIGN_OR_RETURN(std::string content, RequiredString(j, type, "content"));
    return std::make_unique<ReplaceDecoder>(std::move(pattern), std::move(content));
  }
  if (type == "Sequence") {
    INFER_ASSIGN_OR_RETURN(auto parts,
                           ComponentList<Decoder>(j, type, "decoders", DecoderFromJson));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  return absl::InvalidArgumentError(absl::StrCat("decoder type \"", type, "\" is not supported"));
}

}  // namespace infer::text
