// Text inputs of a transformer model, tokenised into the token-id tensors
// it computes: what BertModel::Preprocess does with a request of text.
//
//   text [n]                          n texts, each with a prompt before it:
//                                     the one the request names
//                                     (InferRequest::prompt_name), else the
//                                     model's
//   text [n] with text_pair [n]       n pairs (text[i], text_pair[i])
//   query [1] with documents [n]      n pairs (query, documents[i]): a rerank,
//                                     the query tokenised once
//
// become input_ids and attention_mask, and for pairs token_type_ids where
// the model has a token-type table (a single text's are all 0, the model's
// default), each [n, longest], padded with the tokenizer's pad id; a pair's
// types are what the tokenizer's post-processor gives (0 for the first
// text, 1 for the second in BERT's template). A text (or pair) longer than the
// model's length is cut to it where truncation is asked (the request's
// `truncate`, else the model's auto_truncate): a pair longest_first, as
// Hugging Face's tokenizers and sentence-transformers' CrossEncoder cut it,
// from the end or, with truncate_left, the start. Otherwise it is refused,
// naming both lengths; a query that alone is over the length is refused
// before any pair is built, so each pair holds at most the length plus
// its own document's tokens: what is built is bounded by the model's
// length times the request's rows plus the request's text, whatever the
// number of pairs.
//
// Thread-safe (reads the policy only).
#ifndef INFER_MODELS_BERT_TEXT_INPUTS_H_
#define INFER_MODELS_BERT_TEXT_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/model.h"
#include "models/text/tokenizer.h"

namespace infer {

struct TextInputPolicy {
  const Tokenizer* tokenizer = nullptr;  // borrowed
  std::string model;                     // names the model in errors
  int64_t max_length = 0;                // tokens a sequence may have, the special ones included
  std::string prompt;                    // before every single text (not the texts of pairs)
  std::map<std::string, std::string> prompts;  // those a request may name instead
  bool auto_truncate = false;
  bool with_types = false;  // build token_type_ids
  bool pairs = false;       // the model takes text_pair, and query with documents
};

// The text inputs a model with `policy` declares (TensorSpec): text, and
// with pairs, text_pair, query (shared by the request's rows) and
// documents.
std::vector<TensorSpec> TextInputSpecs(const TextInputPolicy& policy);

// Rewrites a request that passed the spec checks: its text inputs become
// the token-id tensors above. A request of token ids is left as it is;
// one that mixes text and token ids, or gives an incomplete set (text_pair
// without text, query without documents), is INVALID_ARGUMENT naming what
// to send.
absl::Status TokenizeTextInputs(const TextInputPolicy& policy, InferRequest* request);

}  // namespace infer

#endif  // INFER_MODELS_BERT_TEXT_INPUTS_H_
