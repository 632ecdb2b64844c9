#include "models/bert/text_inputs.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

Tensor Int64Tensor(const std::string& name, int64_t rows, int64_t cols,
                   const std::vector<int64_t>& values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt64;
  t.shape = {rows, cols};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  return t;
}

absl::StatusOr<std::vector<absl::string_view>> Elements(const Tensor& t) {
  return BytesElements(t, t.shape.empty() ? 1 : t.shape[0], absl::StrCat("input '", t.name, "'"));
}

// The rows, padded to the longest, as the request's new inputs.
void SetTokenInputs(const TextInputPolicy& policy, const std::vector<text::PairIds>& rows,
                    InferRequest* request) {
  int64_t seq = 0;
  for (const text::PairIds& row : rows) seq = std::max<int64_t>(seq, row.ids.size());
  // Single texts' types are all 0: left out, as the model reads them.
  bool with_types = false;
  for (const text::PairIds& row : rows) with_types = with_types || !row.type_ids.empty();
  with_types = with_types && policy.with_types;
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<int64_t> ids(n * seq, policy.tokenizer->pad_id()), mask(n * seq, 0),
      types(with_types ? n * seq : 0, 0);
  for (int64_t r = 0; r < n; ++r) {
    const text::PairIds& row = rows[r];
    for (size_t s = 0; s < row.ids.size(); ++s) {
      ids[r * seq + s] = row.ids[s];
      mask[r * seq + s] = 1;
      if (with_types && !row.type_ids.empty()) types[r * seq + s] = row.type_ids[s];
    }
  }
  request->inputs.clear();
  request->inputs.push_back(Int64Tensor("input_ids", n, seq, ids));
  request->inputs.push_back(Int64Tensor("attention_mask", n, seq, mask));
  if (with_types) request->inputs.push_back(Int64Tensor("token_type_ids", n, seq, types));
}

absl::Status TooLong(const TextInputPolicy& policy, const std::string& what, size_t tokens) {
  return absl::InvalidArgumentError(absl::StrCat(what, " has ", tokens, " tokens; model '",
                                                 policy.model, "' allows ", policy.max_length));
}

}  // namespace

std::vector<TensorSpec> TextInputSpecs(const TextInputPolicy& policy) {
  std::vector<TensorSpec> specs = {{"text", DataType::kBytes, {-1}, /*optional=*/true}};
  if (policy.pairs) {
    specs.push_back({"text_pair", DataType::kBytes, {-1}, /*optional=*/true});
    TensorSpec query{"query", DataType::kBytes, {1}, /*optional=*/true};
    query.shared = true;
    specs.push_back(std::move(query));
    specs.push_back({"documents", DataType::kBytes, {-1}, /*optional=*/true});
  }
  return specs;
}

absl::Status TokenizeTextInputs(const TextInputPolicy& policy, InferRequest* request) {
  const Tensor* text = FindInput(*request, "text");
  const Tensor* text_pair = FindInput(*request, "text_pair");
  const Tensor* query = FindInput(*request, "query");
  const Tensor* documents = FindInput(*request, "documents");
  const bool ids = FindInput(*request, "input_ids") != nullptr;
  const bool any_text =
      text != nullptr || text_pair != nullptr || query != nullptr || documents != nullptr;
  const char* inputs = policy.pairs ? "'text' (with an optional 'text_pair'), 'query' with "
                                      "'documents', or 'input_ids'"
                                    : "'text' (BYTES) or 'input_ids' (INT64)";
  if (!any_text) {
    if (!ids)
      return absl::InvalidArgumentError(
          absl::StrCat("model '", policy.model, "' needs input ", inputs));
    if (!request->prompt_name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt ", Quote(request->prompt_name),
                       " is put before text; a request of 'input_ids' cannot have one"));
    }
    return absl::OkStatus();
  }
  if (ids || FindInput(*request, "attention_mask") != nullptr ||
      FindInput(*request, "token_type_ids") != nullptr) {
    return absl::InvalidArgumentError(
        "send either 'text' or 'input_ids' (with an optional 'attention_mask' and "
        "'token_type_ids'), not both");
  }
  if ((text != nullptr || text_pair != nullptr) && (query != nullptr || documents != nullptr)) {
    return absl::InvalidArgumentError(
        "send either 'text' (and 'text_pair') or 'query' with "
        "'documents', not both");
  }
  if ((text_pair != nullptr && text == nullptr) || ((query == nullptr) != (documents == nullptr))) {
    return absl::InvalidArgumentError(absl::StrCat(
        text_pair != nullptr ? "'text_pair' needs 'text'" : "'query' and 'documents' go together",
        "; model '", policy.model, "' takes ", inputs));
  }
  const bool truncate = request->truncate.value_or(policy.auto_truncate);
  std::optional<text::Truncation> truncation;
  if (truncate) {
    truncation = text::Truncation{static_cast<size_t>(policy.max_length),
                                  text::TruncationStrategy::kLongestFirst, request->truncate_left};
  }
  std::vector<text::PairIds> rows;
  // The length checks name the input only when one fails: this runs for
  // every text of every request.
  const auto over = [&](size_t tokens) { return static_cast<int64_t>(tokens) > policy.max_length; };
  if (query != nullptr) {
    INFER_ASSIGN_OR_RETURN(const std::vector<absl::string_view> q, Elements(*query));
    INFER_ASSIGN_OR_RETURN(const std::vector<absl::string_view> docs, Elements(*documents));
    if (!truncate) {
      // A query over the length alone fails every pair: refused once,
      // before the pairs copy it.
      absl::StatusOr<std::vector<int32_t>> alone = policy.tokenizer->EncodeIds(q[0], std::nullopt);
      if (!alone.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("input 'query': ", alone.status().message()));
      }
      if (over(alone->size())) return TooLong(policy, "input 'query'", alone->size());
    }
    // Every pair at once, the query tokenised once: each pair then holds at
    // most the length (the query's tokens, checked above or cut) plus its
    // own document's.
    absl::StatusOr<std::vector<text::PairIds>> pairs =
        policy.tokenizer->EncodePairIds(q[0], docs, truncation);
    if (!pairs.ok()) {
      // The tokenizer names a document's pair "element i: ...".
      const absl::string_view m = pairs.status().message();
      return absl::InvalidArgumentError(absl::StartsWith(m, "element ")
                                            ? absl::StrCat("input 'documents' ", m)
                                            : absl::StrCat("input 'query': ", m));
    }
    for (size_t i = 0; i < pairs->size(); ++i) {
      if (over((*pairs)[i].ids.size())) {
        return TooLong(policy, absl::StrCat("input 'documents' element ", i, " with the query"),
                       (*pairs)[i].ids.size());
      }
    }
    SetTokenInputs(policy, *pairs, request);
    return absl::OkStatus();
  }
  INFER_ASSIGN_OR_RETURN(const std::vector<absl::string_view> firsts, Elements(*text));
  std::vector<absl::string_view> seconds;
  if (text_pair != nullptr) {
    INFER_ASSIGN_OR_RETURN(seconds, Elements(*text_pair));
  }
  rows.reserve(firsts.size());
  const std::string* prompt = &policy.prompt;
  if (!request->prompt_name.empty()) {
    auto named = policy.prompts.find(request->prompt_name);
    if (named == policy.prompts.end() || text_pair != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("model '", policy.model, "' has no prompt ",
                                                     Quote(request->prompt_name),
                                                     text_pair != nullptr ? " for pairs" : ""));
    }
    prompt = &named->second;
  }
  std::string prompted;
  for (size_t i = 0; i < firsts.size(); ++i) {
    if (text_pair != nullptr) {
      absl::StatusOr<std::vector<text::PairIds>> pair =
          policy.tokenizer->EncodePairIds(firsts[i], {seconds[i]}, truncation);
      if (!pair.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs 'text' and 'text_pair' element ", i, ": ",
                         absl::StripPrefix(pair.status().message(), "element 0: ")));
      }
      if (over((*pair)[0].ids.size())) {
        return TooLong(policy, absl::StrCat("inputs 'text' and 'text_pair' element ", i),
                       (*pair)[0].ids.size());
      }
      rows.push_back(std::move((*pair)[0]));
      continue;
    }
    absl::string_view sentence = firsts[i];
    if (!prompt->empty()) {
      prompted.assign(*prompt).append(sentence.data(), sentence.size());
      sentence = prompted;
    }
    absl::StatusOr<std::vector<int32_t>> one = policy.tokenizer->EncodeIds(sentence, truncation);
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 'text' element ", i, ": ", one.status().message()));
    }
    if (over(one->size())) {
      return TooLong(policy, absl::StrCat("input 'text' element ", i), one->size());
    }
    // A single text's types are all 0.
    rows.push_back({*std::move(one), {}});
  }
  SetTokenInputs(policy, rows, request);
  return absl::OkStatus();
}

}  // namespace infer
