#include "models/checkpoint.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using Json = nlohmann::json;

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;  // zero
    } else {        // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FF;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / nan
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  const std::streamsize size = in.tellg();
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(data.data(), size)) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return data;
}

}  // namespace

absl::StatusOr<std::map<std::string, CheckpointTensor>> ReadSafetensors(const std::string& path) {
  INFER_ASSIGN_OR_RETURN(const std::string file, ReadFile(path));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (file.size() < 8) return bad("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(file[i]);
  if (header_len > file.size() - 8 || header_len > (uint64_t{100} << 20)) {
    return bad(
        absl::StrCat("header length ", header_len, " exceeds the file (", file.size(), " bytes)"));
  }
  const Json header = Json::parse(file.begin() + 8, file.begin() + 8 + header_len, nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("header is not a JSON object");
  const size_t data_begin = 8 + header_len;
  const uint64_t data_size = file.size() - data_begin;
  std::map<std::string, CheckpointTensor> tensors;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string what = absl::StrCat("tensor '", name, "'");
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
        !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      return bad(absl::StrCat(what, " needs dtype, shape and two data_offsets"));
    }
    const std::string dtype = info["dtype"].get<std::string>();
    // Floating-point tensors are loaded; integer ones (e.g. a position_ids
    // buffer) are checked like the rest and skipped.
    static const std::map<std::string, int64_t> kSizes = {{"F32", 4}, {"F16", 2}, {"BF16", 2},
                                                          {"I64", 8}, {"I32", 4}, {"I16", 2},
                                                          {"I8", 1},  {"U8", 1},  {"BOOL", 1}};
    const auto size_it = kSizes.find(dtype);
    if (size_it == kSizes.end()) {
      return bad(absl::StrCat(what, " has dtype ", dtype,
                              "; supported: F32, F16, BF16 (and integer tensors, skipped)"));
    }
    const int64_t elem = size_it->second;
    const bool floating = dtype == "F32" || dtype == "F16" || dtype == "BF16";
    CheckpointTensor t;
    for (const Json& d : info["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return bad(absl::StrCat(what, " has a dimension that is not a non-negative integer"));
      }
      t.shape.push_back(d.get<int64_t>());
    }
    absl::StatusOr<int64_t> count = ElementCount(t.shape, what);
    if (!count.ok()) return bad(std::string(count.status().message()));
    const Json& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return bad(absl::StrCat(what, " has data_offsets that are not non-negative integers"));
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad(
          absl::StrCat(what, " spans bytes [", begin, ", ", end, ") but the data has ", data_size));
    }
    if (*count > std::numeric_limits<int64_t>::max() / elem ||
        end - begin != static_cast<uint64_t>(*count * elem)) {
      return bad(absl::StrCat(what, " has ", end - begin, " bytes; its shape and dtype ", dtype,
                              " need ", *count * elem));
    }
    if (!floating) continue;
    const char* src = file.data() + data_begin + begin;
    t.values.resize(static_cast<size_t>(*count));
    for (int64_t i = 0; i < *count; ++i) {
      if (dtype == "F32") {
        std::memcpy(&t.values[i], src + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        if (dtype == "F16") {
          t.values[i] = HalfToFloat(h);
        } else {
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          std::memcpy(&t.values[i], &bits, 4);
        }
      }
    }
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

absl::StatusOr<BertConfig> ReadBertConfig(const std::string& path) {
  INFER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  BertConfig c;
  auto positive = [&](const char* field, int64_t* out) -> absl::Status {
    if (!j.contains(field) || !j[field].is_number_integer() || j[field].get<int64_t>() < 1) {
      return bad(absl::StrCat("field '", field, "' must be a positive integer"));
    }
    *out = j[field].get<int64_t>();
    return absl::OkStatus();
  };
  INFER_RETURN_IF_ERROR(positive("vocab_size", &c.vocab_size));
  INFER_RETURN_IF_ERROR(positive("hidden_size", &c.hidden_size));
  INFER_RETURN_IF_ERROR(positive("num_hidden_layers", &c.num_hidden_layers));
  INFER_RETURN_IF_ERROR(positive("num_attention_heads", &c.num_attention_heads));
  INFER_RETURN_IF_ERROR(positive("intermediate_size", &c.intermediate_size));
  INFER_RETURN_IF_ERROR(positive("max_position_embeddings", &c.max_position_embeddings));
  if (j.contains("type_vocab_size"))
    INFER_RETURN_IF_ERROR(positive("type_vocab_size", &c.type_vocab_size));
  if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()) {
    c.pad_token_id = j["pad_token_id"].get<int64_t>();
  }
  if (j.contains("layer_norm_eps")) {
    if (!j["layer_norm_eps"].is_number() || j["layer_norm_eps"].get<double>() <= 0) {
      return bad("field 'layer_norm_eps' must be a positive number");
    }
    c.layer_norm_eps = j["layer_norm_eps"].get<double>();
  }
  c.hidden_act = j.contains("hidden_act") && j["hidden_act"].is_string()
                     ? j["hidden_act"].get<std::string>()
                     : "gelu";
  if (c.hidden_act != "gelu") {
    return bad(absl::StrCat("field 'hidden_act' = '", c.hidden_act, "'; supported: gelu"));
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    return bad(absl::StrCat("hidden_size ", c.hidden_size, " is not divisible by ",
                            "num_attention_heads ", c.num_attention_heads));
  }
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size) {
    return bad(absl::StrCat("field 'pad_token_id' = ", c.pad_token_id, " is outside [0, ",
                            c.vocab_size, ")"));
  }
  return c;
}

}  // namespace infer
