#include "models/checkpoint.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "models/half.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using Json = nlohmann::json;

}  // namespace

absl::StatusOr<std::string> ReadCheckpointFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  const std::streamsize size = in.tellg();
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(data.data(), size)) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return data;
}

absl::StatusOr<std::map<std::string, CheckpointTensor>> ReadSafetensors(const std::string& path) {
  INFER_ASSIGN_OR_RETURN(const std::string file, ReadCheckpointFile(path));
  return ParseSafetensors(file, path);
}

absl::StatusOr<std::map<std::string, CheckpointTensor>> ParseSafetensors(const std::string& file,
                                                                         const std::string& path) {
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
  absl::StatusOr<Json> parsed =
      ParseJson(absl::string_view(file.data() + 8, header_len), "the header");
  if (!parsed.ok()) return bad(std::string(parsed.status().message()));
  const Json& header = *parsed;
  if (!header.is_object()) return bad("header is not a JSON object");
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
    // The element type is decided once per tensor, not per element (a
    // base-sized model has 10^8 of them).
    float* out = t.values.data();
    if (dtype == "F32") {
      if (*count > 0) std::memcpy(out, src, static_cast<size_t>(*count) * 4);
    } else if (dtype == "F16") {
      for (int64_t i = 0; i < *count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
    } else {  // BF16: the upper half of an FP32
      for (int64_t i = 0; i < *count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(out + i, &bits, 4);
      }
    }
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, CheckpointTensor>& tensors,
                              const std::string& dtype) {
  if (dtype != "F32" && dtype != "F16") {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors dtype '", dtype, "' cannot be written; use F32 or F16"));
  }
  const size_t elem = dtype == "F32" ? 4 : 2;
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    absl::StatusOr<int64_t> count = ElementCount(t.shape, name);
    if (!count.ok()) return count.status();
    if (*count != static_cast<int64_t>(t.values.size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has ", t.values.size(),
                                                     " values for shape ", ShapeToString(t.shape)));
    }
    const uint64_t bytes = t.values.size() * elem;
    header[name] = {
        {"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xFF);
  out.write(len, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<char> buf;
  for (const auto& [name, t] : tensors) {
    buf.resize(t.values.size() * elem);
    if (elem == 4) {
      std::memcpy(buf.data(), t.values.data(), buf.size());
    } else {
      for (size_t i = 0; i < t.values.size(); ++i) {
        const uint16_t h = FloatToHalf(t.values[i]);
        std::memcpy(buf.data() + 2 * i, &h, 2);
      }
    }
    out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
  if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace infer
