// What a sentence-transformers model folder says beside the checkpoint
// (the files SentenceTransformer.save writes): the pooling of the Pooling
// module (the folder modules.json names for it, else 1_Pooling), whether
// modules.json ends in Normalize, the length limit of
// sentence_bert_config.json and the prompts of
// config_sentence_transformers.json; and whether its model card (README.md)
// says it was trained for shortened embeddings. Each file is optional; an
// absent one gives sentence-transformers' default.
//
// Thread-safe (reads files, holds no state).
#ifndef INFER_MODELS_BERT_SENTENCE_TRANSFORMERS_FILES_H_
#define INFER_MODELS_BERT_SENTENCE_TRANSFORMERS_FILES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "models/transformer/encoder.h"
#include "models/transformer/splade_head.h"

namespace infer {

// The pooling the Pooling module's config.json declares (mean when the file
// is absent). The module's folder is the one modules.json gives it, else
// 1_Pooling. INVALID_ARGUMENT for a mode other than mean, cls or last token,
// or a module path outside the folder.
absl::StatusOr<Pooling> SentenceTransformersPooling(const std::string& dir);

// Whether sentence-transformers L2-normalises this folder's embeddings:
// whether modules.json lists a Normalize module. Unset when the folder has
// no modules.json (no pipeline is declared).
absl::StatusOr<std::optional<bool>> SentenceTransformersNormalize(const std::string& dir);

// For a sentence-transformers SparseEncoder folder: the settings of the
// SpladePooling module modules.json lists (its folder's config.json:
// pooling_strategy "max" or "sum", activation_function "relu" or
// "log1p_relu"); unset when modules.json lists none. INVALID_ARGUMENT
// naming the file for another value, or a module path outside the folder.
absl::StatusOr<std::optional<SpladePooling>> SentenceTransformersSplade(const std::string& dir);

// sentence_bert_config.json's max_seq_length (unset when the file or the
// field is absent). INVALID_ARGUMENT when it is not a positive integer.
absl::StatusOr<std::optional<int64_t>> SentenceTransformersMaxLength(const std::string& dir);

// The prompt sentence-transformers prepends to every text, as {name, text}:
// config_sentence_transformers.json's prompts[`name`], or its
// default_prompt_name's when `name` is empty (both empty when neither).
// INVALID_ARGUMENT naming the prompts there are for an unknown name, or when
// the Pooling module's include_prompt is false (pooling that leaves the
// prompt's tokens out is not computed).
absl::StatusOr<std::pair<std::string, std::string>> SentenceTransformersPrompt(
    const std::string& dir, std::string name);

// Every prompt of config_sentence_transformers.json, by name (empty when the
// file or its prompts are absent, or when the Pooling module's
// include_prompt is false: pooling without the prompt's tokens is not
// computed, so no prompt can be chosen).
absl::StatusOr<std::map<std::string, std::string>> SentenceTransformersPrompts(
    const std::string& dir);

// Whether the model card's metadata (README.md's YAML front matter, as the
// Hugging Face Hub and sentence-transformers write it) tags the model as
// trained with sentence-transformers' MatryoshkaLoss ("loss:MatryoshkaLoss")
// or "matryoshka": its embeddings may be cut to their first columns.
bool ModelCardDeclaresMatryoshka(const std::string& dir);

}  // namespace infer

#endif  // INFER_MODELS_BERT_SENTENCE_TRANSFORMERS_FILES_H_
