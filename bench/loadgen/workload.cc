#include "bench/loadgen/workload.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace infer::loadgen {

absl::StatusOr<LengthMix> LengthMix::Parse(const std::string& text) {
  auto bad = [&](absl::string_view rule) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence lengths '", text, "': ", rule,
                     " (forms: 128, 16-512, or 16:0.7,128:0.2,512:0.1; lengths in [1, 1048576])"));
  };
  auto length_ok = [](int64_t v) { return v >= 1 && v <= (1 << 20); };
  LengthMix mix;
  if (text.find(':') == std::string::npos) {
    std::vector<std::string> range = absl::StrSplit(text, '-');
    if (range.size() > 2 || !absl::SimpleAtoi(range[0], &mix.lo_)) return bad("not a number");
    mix.hi_ = mix.lo_;
    if (range.size() == 2 && !absl::SimpleAtoi(range[1], &mix.hi_)) return bad("not a number");
    if (!length_ok(mix.lo_) || !length_ok(mix.hi_) || mix.hi_ < mix.lo_) {
      return bad("bad length or range");
    }
    return mix;
  }
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<std::string> lw = absl::StrSplit(part, ':');
    int64_t len = 0;
    double weight = 0;
    if (lw.size() != 2 || !absl::SimpleAtoi(lw[0], &len) || !absl::SimpleAtod(lw[1], &weight)) {
      return bad(absl::StrCat("'", part, "' is not LENGTH:WEIGHT"));
    }
    if (!length_ok(len) || !(weight > 0)) return bad("lengths must be valid and weights > 0");
    mix.lengths_.push_back(len);
    mix.weights_.push_back(weight);
  }
  return mix;
}

int64_t LengthMix::Sample(std::mt19937_64& rng) const {
  if (lengths_.empty()) {
    return std::uniform_int_distribution<int64_t>(lo_, hi_)(rng);
  }
  std::discrete_distribution<size_t> pick(weights_.begin(), weights_.end());
  return lengths_[pick(rng)];
}

int64_t LengthMix::max_length() const {
  return lengths_.empty() ? hi_ : *std::max_element(lengths_.begin(), lengths_.end());
}

std::vector<int64_t> LengthMix::Values() const {
  std::vector<int64_t> out = lengths_;
  if (out.empty()) {
    for (int64_t v = lo_; v <= hi_; ++v) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string LengthMix::ToString() const {
  if (lengths_.empty()) return lo_ == hi_ ? absl::StrCat(lo_) : absl::StrCat(lo_, "-", hi_);
  std::vector<std::string> parts;
  for (size_t i = 0; i < lengths_.size(); ++i) {
    parts.push_back(absl::StrCat(lengths_[i], ":", weights_[i]));
  }
  return absl::StrJoin(parts, ",");
}

std::string RequestFormat::InputName() const {
  if (!input_name.empty()) return input_name;
  return kind == InputKind::kText ? "text" : "input_ids";
}

int64_t RequestFormat::MaxRequestBytes(int64_t batch, int64_t length) const {
  if (kind == InputKind::kText) return batch * (4 + 6 * length);  // "hello " per token
  const int64_t inputs = 1 + !mask_input.empty() + !type_ids_input.empty();
  return inputs * batch * length * (ids_datatype == "INT32" ? 4 : 8);
}

absl::Status ValidateRequestFormat(const RequestFormat& f) {
  if (f.ids_datatype != "INT64" && f.ids_datatype != "INT32") {
    return absl::InvalidArgumentError(
        absl::StrCat("ids datatype '", f.ids_datatype, "': INT64 or INT32"));
  }
  if (f.kind == InputKind::kText && (!f.mask_input.empty() || !f.type_ids_input.empty())) {
    return absl::InvalidArgumentError(
        "a mask or type-ids input goes with token ids, not with text (the server tokenizes)");
  }
  if (f.kind == InputKind::kTokenIds && f.text_column) {
    return absl::InvalidArgumentError("the [batch, 1] text shape is for text input only");
  }
  const std::string name = f.InputName();
  if ((!f.mask_input.empty() && (f.mask_input == name || f.mask_input == f.type_ids_input)) ||
      (!f.type_ids_input.empty() && f.type_ids_input == name)) {
    return absl::InvalidArgumentError("the inputs need distinct names");
  }
  return absl::OkStatus();
}

namespace {

// Appends an integer input of shape [batch, length] whose element (r, t) is
// value(r, t), as INT64 or INT32 raw contents.
template <typename Fn>
void AddIdsInput(inference::ModelInferRequest* req, const std::string& name,
                 const std::string& datatype, int64_t batch, int64_t length, Fn value) {
  auto* in = req->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  in->add_shape(batch);
  in->add_shape(length);
  std::string* raw = req->add_raw_input_contents();
  const size_t n = static_cast<size_t>(batch * length);
  if (datatype == "INT32") {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(value(i / length, i % length));
    raw->assign(reinterpret_cast<const char*>(v.data()), n * sizeof(int32_t));
  } else {
    std::vector<int64_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = value(i / length, i % length);
    raw->assign(reinterpret_cast<const char*>(v.data()), n * sizeof(int64_t));
  }
}

}  // namespace

const inference::ModelInferRequest& RequestPool::Get(int64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<inference::ModelInferRequest>& slot = by_length_[length];
  if (slot != nullptr) return *slot;
  slot = std::make_unique<inference::ModelInferRequest>();
  inference::ModelInferRequest& req = *slot;
  req.set_model_name(model_);
  const RequestFormat& f = format_;
  if (f.kind == InputKind::kTokenIds) {
    AddIdsInput(&req, f.InputName(), f.ids_datatype, batch_, length, [&](int64_t r, int64_t t) {
      return t == 0 ? 101 : t == length - 1 ? 102 : 1000 + (r * 31 + t * 7) % 1000;
    });
    if (!f.mask_input.empty()) {
      AddIdsInput(&req, f.mask_input, f.ids_datatype, batch_, length,
                  [](int64_t, int64_t) { return int64_t{1}; });
    }
    if (!f.type_ids_input.empty()) {
      AddIdsInput(&req, f.type_ids_input, f.ids_datatype, batch_, length,
                  [](int64_t, int64_t) { return int64_t{0}; });
    }
  } else {
    auto* in = req.add_inputs();
    in->set_name(f.InputName());
    in->set_datatype("BYTES");
    in->add_shape(batch_);
    if (f.text_column) in->add_shape(1);
    std::vector<std::string> words(static_cast<size_t>(std::max<int64_t>(1, length - 2)), "hello");
    const std::string sentence = absl::StrJoin(words, " ");
    for (int64_t r = 0; r < batch_; ++r) in->mutable_contents()->add_bytes_contents(sentence);
  }
  return req;
}

}  // namespace infer::loadgen
