// The Model interface: what a servable model states about itself (its inputs
// and outputs) and how a batch of requests is executed on a device.
//
// Ownership: a Model owns its weights on the device it was created for; the
// Device is borrowed and outlives the model (the Engine guarantees it).
//
// Thread-safety, the contract every model keeps:
// - Every const method (spec, Preprocess, ValidateRequest, SequenceLength,
//   RealTokens, StateTokens, DeclaredSequenceLength, PeakBytes, ComputedTokens,
//   WeightBytes, UsesDevice, tokenizer, PromptText) may be called from any number of threads at
//   once, and while Prepare runs. The engine does exactly that: every front
//   end thread admits its requests (AdmitRequest: the declared limits,
//   Preprocess, ValidateRequest, SequenceLength, RealTokens, StateTokens,
//   PeakBytes)
//   while the model's batcher plans batches (PeakBytes, ComputedTokens) and
//   prepares them. So these methods read state fixed at creation; a model
//   that caches anything in them synchronises it itself. They must also be
//   deterministic: the same request gives the same answer on every thread.
// - Prepare is never called concurrently on one model (the engine holds a
//   per-model lock around it: its batcher and its out-of-memory retries both
//   prepare); it may change the model's own state.
// - The ModelBatch objects Prepare returns are independent of each other
//   and of the model's const methods: a batch's stages run on pipeline
//   threads while the next batch is prepared and new requests are admitted.
// engine/model_concurrency_test.cc holds the built-in models to this.
#ifndef INFER_MODELS_MODEL_H_
#define INFER_MODELS_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "batching/batch_shape.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace infer {

class Tokenizer;  // models/text/tokenizer.h

// One input or output as a model declares it. The first dimension is the
// batch dimension; -1 marks a dimension of any size.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kFp32;
  std::vector<int64_t> shape;
  // An input the request may leave out (the model's checks say which
  // combinations it needs).
  bool optional = false;
  // An INT64 input that also takes INT32 (token ids and masks, which Triton
  // clients often send as INT32): widened to INT64 at admission
  // (WidenInt32Inputs), so the model sees INT64 only.
  bool accepts_int32 = false;
  // An input that holds one value for the whole request rather than one
  // per row (a rerank's query against its documents): its first dimension
  // is fixed at 1 and is not the batch dimension. The model's Preprocess
  // rewrites such a request into one without shared inputs: after it, the
  // engine takes every input's first dimension as the batch (to count rows
  // and to split the request).
  bool shared = false;
  // An output whose last dimension holds one score per class: the classes'
  // names, in order (Triton's label file; the id2label of a Hugging Face
  // classifier). Empty otherwise.
  std::vector<std::string> labels;
  // Those scores are independent (a multi-label classifier): each goes
  // through a sigmoid rather than all through one softmax.
  bool multi_label = false;
  // An embedding output (one vector per row, L2-normalised or not as the
  // model is configured) whose normalisation a request may choose
  // (InferRequest::normalize).
  bool normalizable = false;
  // An embedding output a request may ask narrower (InferRequest::dimensions:
  // its first columns, L2-normalised again when normalised), because the
  // model was trained for it (Matryoshka representation learning).
  bool matryoshka = false;
  // An output computed and returned only for a request that names it in
  // requested_outputs (e.g. per-token embeddings, costly beside the pooled
  // one): a request that names no outputs gets the others.
  bool on_request = false;
};

struct ModelSpec {
  std::string name;
  std::string platform;  // reported in ModelMetadata, e.g. "infer_embed_pool"
  std::string backend;   // the config.pbtxt backend that built it, e.g. "embed_pool"
  // The arithmetic it computes in ("fp32", "bf16", "fp16"), chosen at load;
  // empty for a model that computes nothing.
  std::string precision;
  // Why that precision, when the model chose it (`auto`), e.g. "auto: AMX
  // on GenuineIntel family 6 model 143, so bf16"; empty when it was named.
  std::string precision_reason;
  // How it computes, for the load log (e.g. the kernels chosen); may be
  // empty.
  std::string implementation;
  // What it is, as read from its files (family, tokenizer, pooling, length),
  // for the load log; may be empty.
  std::string description;
  // Each sequence's outputs are bit-identical whatever it is batched with
  // (e.g. the BERT encoder's batch_invariant mode); reported by ModelConfig.
  bool batch_invariant = false;
  // The prompts a request may name (InferRequest::prompt_name), e.g.
  // "query" and "document": the text put before each of its texts.
  std::vector<std::string> prompts;
  // For an embedding model: how its token states become one vector
  // ("mean", "cls", "last_token", or "splade" for a sparse one), as TEI's
  // /info reports it; else empty.
  std::string pooling;
  // For a model that tokenises text: the most tokens one sequence may have,
  // special tokens included (TEI's max_input_length); 0 when not stated.
  int64_t max_sequence_length = 0;
  // Texts longer than max_sequence_length are cut rather than refused when
  // a request does not say (TEI's auto_truncate, reported by /info).
  bool auto_truncate = false;
  // The load-time check of what it computes against the CPU's FP32
  // (models/bert/precision_check.h), as /info reports it, e.g. "fp16 on the
  // device against the CPU's fp32: 1050 texts: cosine mean 0.9999, ..." or
  // "... not checked ... (precision_gate false)"; empty when nothing was to
  // check (FP32 on the CPU).
  std::string quality_check;
  // Its figures where measured, for the infer_model_quality_check gauge.
  std::optional<double> check_min_cosine, check_neighbour_overlap, check_spearman;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// One input as the client declared it, before its contents are decoded.
struct DeclaredInput {
  absl::string_view name;
  absl::Span<const int64_t> shape;
};

struct InferRequest {
  std::string model_name;
  std::string id;  // echoed in the response
  std::vector<Tensor> inputs;
  // Outputs to return, by name; empty means all of the model's outputs but
  // those it computes on request only (TensorSpec::on_request).
  std::vector<std::string> requested_outputs;
  // Scheduling: 1 is the most urgent level; 0 means the model's default.
  int64_t priority = 0;
  // Answered DEADLINE_EXCEEDED, without computing, if not started by then.
  absl::Time deadline = absl::InfiniteFuture();
  // Relative timeout (the KServe/Triton "timeout" parameter); zero: none.
  absl::Duration timeout = absl::ZeroDuration();
  // Polled while queued; true drops the request (CANCELLED). Optional.
  std::function<bool()> is_cancelled;
  // For a model that tokenises text: whether a text longer than the model
  // takes is cut to its length (true) or refused (false); unset, the
  // model's own setting (e.g. auto_truncate). `truncate_left` cuts from the
  // start instead of the end.
  std::optional<bool> truncate;
  bool truncate_left = false;
  // For a model with prompts (ModelSpec::prompts): the one to put before
  // each text; empty, the model's default (if any).
  std::string prompt_name;
  // For an embedding output: L2-normalised or not (unset: as the model is
  // configured; TensorSpec::normalizable), and the width to cut it to
  // (0: the whole; TensorSpec::matryoshka).
  std::optional<bool> normalize;
  int64_t dimensions = 0;
};

struct InferResponse {
  std::string model_name;
  std::string id;
  std::vector<Tensor> outputs;
  // The request's tokens as the model counts them (Model::RealTokens, after
  // tokenising any text): what OpenAI's usage.prompt_tokens reports. Set by
  // the engine when it answers.
  int64_t real_tokens = 0;
};

// One batch on its way through a model, in the stages of the device pipeline
// (runtime/pipeline.h): each method is called once, in this order, each
// possibly from a different thread; a failure skips the later stages. The
// requests given to Prepare outlive the ModelBatch. Device memory and staging
// buffers are released when the ModelBatch is destroyed, which happens only
// after all of its device work has finished.
class ModelBatch {
 public:
  virtual ~ModelBatch() = default;
  // Enqueue host→device copies of the inputs on `stream`.
  virtual absl::Status Upload(Stream* stream) = 0;
  // Enqueue the computation on `stream` (ordered after Upload by the caller).
  virtual absl::Status Compute(Stream* stream) = 0;
  // Enqueue device→host copies of the outputs on `stream`.
  virtual absl::Status Download(Stream* stream) = 0;
  // After the download has completed: fill responses[i] for the i-th request
  // with every output of the spec.
  virtual absl::Status Finish(absl::Span<InferResponse* const> responses) = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelSpec& spec() const = 0;

  // Rewrites a request that passed the spec checks into the form the model
  // executes (e.g. text into token ids), before ValidateRequest. Called once
  // per request, before it is queued. Errors are the client's
  // (INVALID_ARGUMENT).
  virtual absl::Status Preprocess(InferRequest* request) const { return absl::OkStatus(); }

  // Checks beyond the spec that need the data (e.g. token ids within the
  // vocabulary). Called before the request is queued; the spec checks
  // (ValidateRequestAgainstSpec) and Preprocess have already run.
  virtual absl::Status ValidateRequest(const InferRequest& request) const {
    return absl::OkStatus();
  }

  // The sequence length a request is classified by: by default the second
  // dimension of its first input of rank >= 2 (else 1). A batch's work must
  // not depend on lengths beyond the longest of its requests'.
  virtual int64_t SequenceLength(const InferRequest& request) const;
  // The request's real tokens (e.g. those its attention mask marks), at
  // most rows × SequenceLength: by default exactly that, every position
  // counted. Called once per request, after ValidateRequest.
  virtual int64_t RealTokens(const InferRequest& request) const;
  // Of those, the tokens whose per-token outputs the request asks for
  // (BatchShape::state_tokens): 0 by default, and for a request that asks
  // for none. Called once per request, after ValidateRequest.
  virtual int64_t StateTokens(const InferRequest& request) const { return 0; }
  // The sequence length as far as the declared shapes tell it, before the
  // request is decoded or preprocessed, so that the length limits can be
  // checked first: by default the rule of SequenceLength; 0 when the shapes
  // do not tell (e.g. text, tokenized later). Never more than SequenceLength
  // of the decoded request.
  virtual int64_t DeclaredSequenceLength(absl::Span<const DeclaredInput> inputs) const;

  // Memory model: estimated peak device bytes (activations and workspace,
  // as the CachingAllocator hands them out) of a batch of this shape, never
  // below what it uses. Used by admission; 0 means unknown (no memory
  // admission for this model).
  virtual int64_t PeakBytes(const BatchShape& shape) const { return 0; }
  // The tokens a batch of this shape computes (what max_batch_tokens
  // limits, and the denominator of the padding efficiency): rows × length
  // for a model that pads every sequence to the longest (the default), the
  // real tokens for one that packs them.
  virtual int64_t ComputedTokens(const BatchShape& shape) const { return shape.padded_tokens(); }
  // Device bytes the model holds for as long as it is loaded: its weights,
  // and buffers it keeps (e.g. the BERT encoder's CUDA-graph buffers).
  virtual int64_t WeightBytes() const { return 0; }
  // False for a model whose batches do no device work (their Upload,
  // Compute and Download do nothing and ignore the stream): the engine then
  // runs each batch inline on its batcher's thread, with null streams,
  // instead of handing it through the device pipeline's threads.
  virtual bool UsesDevice() const { return true; }
  // For a model that tokenises text: its tokenizer (null for others), and
  // the text a request with `prompt_name` has put before each of its texts
  // (the model's default when empty; INVALID_ARGUMENT for a prompt it does
  // not have). What TEI's /tokenize and /decode show.
  virtual const Tokenizer* tokenizer() const { return nullptr; }
  virtual absl::StatusOr<std::string> PromptText(const std::string& prompt_name) const;

  // Packs validated `requests` into one batch (host-side work: staging the
  // inputs). A non-OK status fails the whole batch.
  virtual absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) = 0;
};

// Runs a prepared batch's stages in order on `stream`, waits for them
// (unless `device` is null: a model without device work, with a null
// stream), then Finish: the one sequence for callers without a pipeline.
absl::Status RunPrepared(ModelBatch& batch, Device* device, Stream* stream,
                         absl::Span<InferResponse* const> responses);

// Prepare, then RunPrepared: for tests, tools and callers without a
// pipeline.
absl::Status RunBatch(Model& model, Device* device, Stream* stream,
                      absl::Span<const InferRequest* const> requests,
                      absl::Span<InferResponse* const> responses);

// Checks a request against a model's spec: every input known and given once,
// data types, ranks and fixed dimensions, byte sizes against shapes (with
// overflow checks), one batch dimension shared by all inputs but the shared
// ones (TensorSpec::shared, whose first dimension must be 1), and not 0 (a
// request of no row, "input 'x' is empty"), requested
// outputs known and unique, and the request's options (CheckRequestOptions).
// Every failure is INVALID_ARGUMENT naming the tensor or option, what was
// wrong and what is allowed.
absl::Status ValidateRequestAgainstSpec(const ModelSpec& spec, const InferRequest& request);
// The part of it that checks the request's options against the model:
// prompt_name one of spec.prompts; normalize and dimensions only with an
// embedding output returned (TensorSpec::normalizable), dimensions from 1
// to its width, and below the width only where it is matryoshka.
// INVALID_ARGUMENT naming the option and the model's limit.
absl::Status CheckRequestOptions(const ModelSpec& spec, const InferRequest& request);
// CheckRequestOptions' test of `dimensions` for `output`: what a front end
// calls to name the field at fault before it builds the request.
absl::Status CheckDimensions(const ModelSpec& spec, const TensorSpec& output, int64_t dimensions);

// Widens every INT32 input whose spec is INT64 with accepts_int32 to INT64,
// in place; other inputs are left for ValidateRequestAgainstSpec to judge.
// INVALID_ARGUMENT (as that check words it) when such an input's bytes do
// not match its shape, before anything is allocated: the widened copy is
// twice the bytes received.
absl::Status WidenInt32Inputs(const ModelSpec& spec, InferRequest* request);

// The inputs of `spec` that accept INT32 (TensorSpec::accepts_int32), in order.
std::vector<std::string> Int32InputNames(const ModelSpec& spec);

// For ModelBatch::Finish: splits consecutive FP32 rows of `width` values into
// one [rows_per_request[i], width] output named `name` per response.
void AppendFp32Rows(const std::string& name, const float* data, int64_t width,
                    absl::Span<const int64_t> rows_per_request,
                    absl::Span<InferResponse* const> responses);

// The batch dimension of a request that passed ValidateRequestAgainstSpec.
int64_t RequestBatchSize(const InferRequest& request);

// The request's input named `name`, or null.
const Tensor* FindInput(const InferRequest& request, absl::string_view name);

}  // namespace infer

#endif  // INFER_MODELS_MODEL_H_
