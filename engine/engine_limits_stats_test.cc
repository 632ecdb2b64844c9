#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace infer {
namespace {

using namespace ::infer::testing_engine;  // NOLINT: the shared test doubles

TEST(EngineLimitsTest, EachLimitIsEnforcedWithItsNameAndServingContinues) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_client_batch_size = 4;
  limits.max_input_length = 10;
  limits.max_request_tokens = 24;
  limits.max_tensor_elements = 40;
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              IsOk());
  EXPECT_THAT(engine->Infer(Probe("rows", 5, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "batch dimension 5, over the limit of 4 per request of model 'probe' "
                       "(request_limits.max_client_batch_size)"));
  EXPECT_THAT(engine->Infer(Probe("long", 1, 11)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input has 11 tokens per sequence, over the limit of 10 of model 'probe' "
                       "(request_limits.max_input_length)"));
  EXPECT_THAT(engine->Infer(Probe("tokens", 3, 9)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request has 3 sequences of 9 tokens = 27 tokens, over the limit of 24"));
  // A declared shape far beyond the data is refused on the shape alone,
  // without overflow, before the spec checks look at the bytes.
  InferRequest huge = Probe("huge", 1, 3);
  huge.inputs[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THAT(engine->Infer(std::move(huge)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "over the limit of 40 elements per tensor of model 'probe' "
                       "(request_limits.max_tensor_elements)"));
  // Within every limit; a request over max_batch_size (2) is still split.
  EXPECT_THAT(engine->Infer(Probe("ok", 4, 6)), IsOk());
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_over_limit, 4u);
  EXPECT_EQ(st.rejected_invalid, 0u);
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kInvalidArgument), 4u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 1u) << "a split request counts once";
}

TEST(EngineLimitsTest, TextBytesAreLimitedBeforeTokenization) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_text_bytes = 64;
  EmbedPoolOptions o;
  ASSERT_THAT(engine->AddModel(*EmbedPoolModel::Create(o, engine->context()),
                               Batching(8, absl::ZeroDuration()), limits),
              IsOk());
  InferRequest r;
  r.model_name = "embed_pool";
  Tensor text;
  text.name = "text";
  text.dtype = DataType::kBytes;
  text.shape = {2};
  AppendBytesElement(std::string(40, 'a'), &text.data);
  AppendBytesElement(std::string(40, 'b'), &text.data);
  r.inputs.push_back(std::move(text));
  EXPECT_THAT(engine->Infer(std::move(r)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request has 88 bytes of text (BYTES inputs), over the limit of 64 of "
                       "model 'embed_pool' (request_limits.max_text_bytes)"));
}

TEST(EngineLimitsTest, NonPositiveLimitsAreRefused) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_request_tokens = 0;
  EXPECT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request_limits.max_request_tokens must be >= 1, got 0"));
}

TEST(EngineStatsTest, HistogramsPerLengthBucketCountEveryRequestAndBatch) {
  auto engine = CpuEngine();
  QueueOptions q = Batching(8, absl::Milliseconds(50));
  q.length_buckets = {4, 16};
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}), q), IsOk());
  Results results;
  for (int i = 0; i < 6; ++i)
    engine->Submit(Probe(absl::StrCat("s", i), 1, 3), results.For(absl::StrCat("s", i)));
  for (int i = 0; i < 3; ++i)
    engine->Submit(Probe(absl::StrCat("l", i), 2, 12), results.For(absl::StrCat("l", i)));
  ASSERT_TRUE(results.WaitFor(9));
  const ModelStats st = *engine->GetModelStats("probe");
  ASSERT_EQ(st.buckets.size(), 2u);
  EXPECT_EQ(st.buckets[0].max_length, 4);
  EXPECT_EQ(st.buckets[1].max_length, 16);
  EXPECT_EQ(st.buckets[0].request_seconds.count(), 6u);
  EXPECT_EQ(st.buckets[1].request_seconds.count(), 3u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 6u);
  EXPECT_EQ(st.buckets[1].queue_seconds.count(), 3u);
  // Rows per batch add up to the rows sent; one compute observation a batch.
  EXPECT_DOUBLE_EQ(st.buckets[0].batch_rows.sum(), 6.0);
  EXPECT_DOUBLE_EQ(st.buckets[1].batch_rows.sum(), 6.0);
  EXPECT_EQ(st.buckets[0].compute_seconds.count() + st.buckets[1].compute_seconds.count(),
            st.execution_count);
  // Every sequence of a bucket has the same length here: no padding.
  EXPECT_DOUBLE_EQ(st.buckets[0].padding_efficiency.Quantile(0.5) > 0.95, true);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 9u);
  uint64_t phases = 0;
  for (const auto& [size, p] : st.batch_stats) phases += p.compute_input.count;
  EXPECT_EQ(phases, st.execution_count);
  EXPECT_EQ(st.compute_output.count, 9u);
  EXPECT_EQ(*engine->GetQueueDepths("probe"), (std::vector<int64_t>{0, 0}));
}

TEST(EngineStatsTest, ASplitRequestIsCountedOnceWithItsPiecesSummed) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration())),
              IsOk());
  ASSERT_THAT(engine->Infer(Probe("whole", 5, 3)), IsOk());  // pieces of 2, 2 and 1 rows
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_EQ(st.inference_count, 5u) << "rows";
  EXPECT_GE(st.execution_count, 3u);
  for (const DurationStat* d :
       {&st.success, &st.queue, &st.compute_input, &st.compute_infer, &st.compute_output}) {
    EXPECT_EQ(d->count, 1u) << "one client request";
  }
  EXPECT_EQ(st.fail.count, 0u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 1u);
  EXPECT_EQ(st.buckets[0].request_seconds.count(), 1u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 1u);
  EXPECT_EQ(st.buckets[0].compute_seconds.count(), st.execution_count);
}

TEST(EngineStatsTest, QueueAndComputePhasesAddUpToAtMostTheRequestTime) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(
                                   ProbeModel::Options{.compute_time = absl::Milliseconds(2)}),
                               Batching(4, absl::Milliseconds(1))),
              IsOk());
  Results results;
  for (int i = 0; i < 12; ++i) {
    engine->Submit(Probe(absl::StrCat(i)), results.For(absl::StrCat(i)));
  }
  ASSERT_TRUE(results.WaitFor(12));
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.success.count, 12u);
  EXPECT_EQ(st.queue.count, 12u);
  // The phases follow one another (queue, then input, infer, output): they
  // never overlap, so they sum to no more than the end-to-end time.
  EXPECT_LE(st.queue.ns + st.compute_input.ns + st.compute_infer.ns + st.compute_output.ns,
            st.success.ns);
  EXPECT_GE(st.compute_infer.ns, 12u * 2'000'000u) << "each request's batch computed >= 2 ms";
}

TEST(EngineStatsTest, FailedRequestsCountOnlyAsFailures) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(Flaky(1), Batching(4, absl::ZeroDuration())), IsOk());
  EXPECT_THAT(engine->Infer(Ids("flaky", {1, 2})),
              StatusIs(absl::StatusCode::kInternal, "injected compute fault"));
  ASSERT_THAT(engine->Infer(Ids("flaky", {1, 2})), IsOk());
  const ModelStats st = *engine->GetModelStats("flaky");
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.success.count, 1u);
  // Triton's meaning: queue and compute times are those of successes.
  for (const DurationStat* d :
       {&st.queue, &st.compute_input, &st.compute_infer, &st.compute_output}) {
    EXPECT_EQ(d->count, 1u);
  }
  EXPECT_EQ(st.execution_count, 1u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 1u);
}

TEST(EngineStatsTest, ARefusalOfAFrontEndIsCountedLikeTheEnginesOwn) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration())),
              IsOk());
  const absl::Status refusal = absl::InvalidArgumentError("over the limit");
  ASSERT_THAT(engine->CountRefusal("probe", refusal, RefusalReason::kOverLimit), IsOk());
  EXPECT_THAT(engine->CountRefusal("nope", refusal, RefusalReason::kOverLimit),
              StatusIs(absl::StatusCode::kNotFound, "unknown model 'nope'"));
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.success.count, 0u);
  EXPECT_EQ(st.rejected_over_limit, 1u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kInvalidArgument), 1u);
}

TEST(EngineStatsTest, ASplitRequestWithARefusedPieceIsRefusedOnceAndItsOtherPiecesDropped) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  testing::Notification release;  // the blocker holds the device until then
  // One queued request at most: of the split request's three pieces, the
  // first is queued behind the running blocker and the other two refused.
  Results results;
  ProbeModel* probe =
      AddProbeAndHoldTheDevice(*engine, Batching(2, absl::ZeroDuration(), 1), &release, results);
  ASSERT_NE(probe, nullptr);
  engine->Submit(Probe("split", 5), results.For("split"));
  release.Notify();
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_THAT(results.status["blocker"], IsOk());
  EXPECT_THAT(results.status["split"], StatusIs(absl::StatusCode::kUnavailable, "full"));
  EXPECT_EQ(probe->order(), std::vector<std::string>{"blocker"})
      << "the queued piece of a refused request is not run";
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_queue_full, 1u) << "one client request, refused once";
  EXPECT_EQ(st.cancelled, 0u);
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kUnavailable), 1u);
  EXPECT_EQ(st.success.count, 1u);
}

// A front end's request: declares shapes; its contents must never be
// decoded when the declared shapes are over a limit.
class ShapesSource final : public RequestSource {
 public:
  ShapesSource(std::string model, std::vector<std::vector<int64_t>> shapes,
               absl::Status declare = absl::OkStatus())
      : model_(std::move(model)), shapes_(std::move(shapes)), declare_(std::move(declare)) {}
  const std::string& model_name() const override { return model_; }
  absl::Status Declare(const ModelSpec&, DeclaredRequest* declared) override {
    for (size_t i = 0; i < shapes_.size(); ++i) {
      declared->inputs.push_back({i == 0 ? "input_ids" : "other", shapes_[i]});
    }
    return declare_;
  }
  absl::Status Decode(const ModelSpec&, InferRequest*) override {
    decoded = true;
    return absl::InvalidArgumentError("decoded");
  }
  bool decoded = false;

 private:
  std::string model_;
  std::vector<std::vector<int64_t>> shapes_;
  absl::Status declare_;
};

TEST(EngineLimitsTest, TokenLimitsApplyToTheDeclaredShapeBeforeDecoding) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_input_length = 10;
  limits.max_request_tokens = 24;
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              IsOk());
  auto submit = [&](ShapesSource source) {
    absl::Status status;
    engine->Submit(source, [&](absl::StatusOr<InferResponse> r) { status = r.status(); });
    return std::make_pair(status, source.decoded);
  };
  // Shapes only: refused on the declared shape, never decoded.
  auto [long_seq, long_decoded] = submit(ShapesSource("probe", {{1, 11}}));
  EXPECT_THAT(long_seq, StatusIs(absl::StatusCode::kInvalidArgument,
                                 "input has 11 tokens per sequence, over the limit of 10 of model "
                                 "'probe' (request_limits.max_input_length)"));
  EXPECT_FALSE(long_decoded);
  auto [many, many_decoded] = submit(ShapesSource("probe", {{3, 9}}));
  EXPECT_THAT(many, StatusIs(absl::StatusCode::kInvalidArgument,
                             "request has 3 sequences of 9 tokens = 27 tokens, over the limit of "
                             "24 of model 'probe' (request_limits.max_request_tokens)"));
  EXPECT_FALSE(many_decoded);
  // Within the limits: decoded (this source's decoding then fails).
  auto [fine, fine_decoded] = submit(ShapesSource("probe", {{2, 10}}));
  EXPECT_THAT(fine, StatusIs(absl::StatusCode::kInvalidArgument, "decoded"));
  EXPECT_TRUE(fine_decoded);
  // A negative dimension is the decoder's to name; the other inputs are
  // still checked.
  auto [bad, bad_decoded] = submit(ShapesSource("probe", {{-1, 99}, {1, 11}}));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "max_input_length"));
  EXPECT_FALSE(bad_decoded);
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_over_limit, 3u);
  EXPECT_EQ(st.rejected_invalid, 1u) << "the one that failed to decode";
  EXPECT_EQ(st.fail.count, 4u);
  // A request that cannot say what it declares is counted as invalid; one
  // for an unknown model is counted nowhere.
  auto [unreadable, unreadable_decoded] =
      submit(ShapesSource("probe", {}, absl::InvalidArgumentError("undecodable")));
  EXPECT_THAT(unreadable, StatusIs(absl::StatusCode::kInvalidArgument, "undecodable"));
  EXPECT_FALSE(unreadable_decoded);
  auto [unknown, unknown_decoded] = submit(ShapesSource("unknown", {{1, 1}}));
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kNotFound, "unknown model"));
  const ModelStats after = *engine->GetModelStats("probe");
  EXPECT_EQ(after.rejected_invalid, 2u);
  EXPECT_EQ(after.fail.count, 5u);
  EXPECT_EQ(after.requests_by_code.at(absl::StatusCode::kInvalidArgument), 5u);
}

}  // namespace
}  // namespace infer
