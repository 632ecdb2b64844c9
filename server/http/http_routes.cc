#include "server/http/http_routes.h"

#include <google/protobuf/message.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/quote.h"
#include "server/http/http_infer_codec.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/rest_request.h"
#include "server/http/route_table.h"
#include "server/http/scoring_routes.h"
#include "server/http/tei_routes.h"
#include "server/kserve/kserve_service.h"
#include "server/metrics.h"

namespace infer {
namespace {

using nlohmann::json;

HttpResponse Error(const absl::Status& status) { return ShapedError(ErrorShape::kKserve, status); }

HttpResponse Json(const json& value) { return {200, "application/json", DumpJson(value)}; }

HttpResponse ProtoOrError(const absl::Status& status, const google::protobuf::Message& message) {
  if (!status.ok()) return Error(status);
  return Json(ProtoToJson(message));
}

// 200 with no body, or 400 (Triton's answer for "not ready").
HttpResponse Readiness(bool ready) { return {ready ? 200 : 400, "application/json", ""}; }

void Infer(Engine* engine, const std::string& model, const std::string& version,
           HttpRequest request, HttpReply reply) {
  // Filled when the engine has the body parsed; a success is answered only
  // after that, a refusal needs none of it.
  auto choices = std::make_shared<RestOutputChoices>();
  RestRequestSource source(model, version, &request, choices.get());
  auto shared_reply = std::make_shared<HttpReply>(std::move(reply));
  engine->Submit(source, [shared_reply, choices](absl::StatusOr<InferResponse> result) {
    if (!result.ok()) return shared_reply->Send(Error(result.status()));
    auto response = std::make_shared<InferResponse>(*std::move(result));
    shared_reply->SendFrom([response, choices] {
      RestBody body = EncodeRestInferResponse(*response, *choices);
      HttpResponse r{200, body.content_type, std::move(body.body)};
      if (body.binary) {
        r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(body.json_length));
      }
      return r;
    });
  });
}

// /v2/models/{m}[/versions/{v}][/action]: the rest after "/v2/models/".
void ModelRoute(Engine* engine, const std::vector<absl::string_view>& parts, HttpRequest request,
                HttpReply reply) {
  std::string model, version;
  if (!DecodeSegment(parts[0], &model)) {
    return reply.Send(Error(absl::InvalidArgumentError("malformed percent-encoding in the path")));
  }
  size_t next = 1;
  if (parts.size() >= 3 && parts[1] == "versions") {
    if (!DecodeSegment(parts[2], &version)) {
      return reply.Send(
          Error(absl::InvalidArgumentError("malformed percent-encoding in the path")));
    }
    next = 3;
  }
  const absl::string_view action = next < parts.size() ? parts[next] : "";
  if (next + 1 < parts.size() || (next < parts.size() && action.empty())) {
    return reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
  }
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (action == "infer") {
    if (request.method != "POST")
      return reply.Send(MethodNotAllowed(ErrorShape::kKserve, "POST", request));
    if (auto problem = BodyTypeProblem(request, /*octet_stream=*/true)) {
      return reply.Send(ShapedError(ErrorShape::kKserve, *problem, 415));
    }
    return Infer(engine, model, version, std::move(request), std::move(reply));
  }
  if (!get) return reply.Send(MethodNotAllowed(ErrorShape::kKserve, "GET", request));
  if (action.empty()) {
    inference::ModelMetadataResponse m;
    return reply.Send(ProtoOrError(FillModelMetadata(*engine, model, version, &m), m));
  }
  if (action == "ready") return reply.Send(Readiness(IsModelReady(*engine, model, version)));
  if (action == "config") {
    inference::ModelConfigResponse m;
    absl::Status s = FillModelConfig(*engine, model, version, &m);
    return reply.Send(ProtoOrError(s, m.config()));  // Triton answers the config itself
  }
  if (action == "stats") {
    inference::ModelStatisticsResponse m;
    return reply.Send(ProtoOrError(FillModelStatistics(*engine, model, version, &m), m));
  }
  reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
}

// The routes with parameters in the path, and 404 (DispatchRoute's
// `other`: the fixed paths are kRoutes').
void ParameterRoute(const RouteContext& context, HttpRequest request, HttpReply reply) {
  Engine* engine = context.engine;
  const bool get = request.method == "GET" || request.method == "HEAD";
  std::vector<absl::string_view> parts = absl::StrSplit(request.path, '/');
  // "/v2/models/x" splits into "", "v2", "models", "x".
  if (parts.size() < 2 || !parts[0].empty()) {
    return reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
  }
  parts.erase(parts.begin());
  if (parts[0] == "v2" && parts.size() >= 3 && parts[1] == "models" && !parts[2].empty()) {
    parts.erase(parts.begin(), parts.begin() + 2);
    return ModelRoute(engine, parts, std::move(request), std::move(reply));
  }
  if (parts[0] == "v1") {
    if (parts.size() >= 2 && parts[1] == "models" && parts.size() <= 3) {
      if (!get) return reply.Send(MethodNotAllowed(ErrorShape::kKserve, "GET", request));
      std::string model;
      if (parts.size() == 3 && !DecodeSegment(parts[2], &model)) {
        return reply.Send(OpenAiError(absl::InvalidArgumentError("malformed percent-encoding")));
      }
      return reply.Send(ListOpenAiModels(*engine, model));
    }
    return reply.Send(
        OpenAiError(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
  }
  reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
}

// TEI's health check (GET /, /health, /ping): 200 when the server, and the
// model a base path names, are ready; else 503.
void TeiHealth(const RouteContext& context, HttpRequest request, HttpReply reply) {
  const std::string model(PathModel(request));
  if (context.engine->Ready() && (model.empty() || IsModelReady(*context.engine, model, ""))) {
    return reply.Send(HttpResponse{200, "application/json", ""});
  }
  reply.Send(ShapedError(
      ErrorShape::kTei,
      absl::UnavailableError(model.empty()
                                 ? std::string("the server is not ready (draining or starting)")
                                 : absl::StrCat("model ", Quote(model), " is not ready")),
      503));
}

// TEI's GET /info: the model the path names, else ?model=, else the one
// loaded model (TeiInfo).
void TeiInfoRoute(const RouteContext& context, HttpRequest request, HttpReply reply) {
  std::string model;
  for (absl::string_view param : absl::StrSplit(request.query, '&')) {
    if (absl::ConsumePrefix(&param, "model=") && !DecodeSegment(param, &model)) {
      return reply.Send(ShapedError(
          ErrorShape::kTei, absl::InvalidArgumentError("malformed percent-encoding in the query")));
    }
  }
  if (const absl::string_view path_model = PathModel(request); !path_model.empty()) {
    if (!model.empty() && model != path_model) {
      return reply.Send(ShapedError(
          ErrorShape::kTei, absl::InvalidArgumentError(absl::StrCat(
                                "?model=", Quote(model), " is not the model the path names (",
                                Quote(path_model), ")"))));
    }
    model = std::string(path_model);
  }
  reply.Send(TeiInfo(*context.engine, model));
}

template <ScoringApi kApi>
void Scoring(const RouteContext& context, HttpRequest request, HttpReply reply) {
  HandleScoring(kApi, context.engine, std::move(request), std::move(reply));
}

// An Engine-only handler as a RouteHandler.
template <void (*kHandle)(Engine*, HttpRequest, HttpReply)>
void OnEngine(const RouteContext& context, HttpRequest request, HttpReply reply) {
  kHandle(context.engine, std::move(request), std::move(reply));
}

void Metrics(const RouteContext& context, HttpRequest, HttpReply reply) {
  reply.Send(MetricsResponse(*context.engine, context.gpu, context.api_key));
}

void ServerMetadata(const RouteContext&, HttpRequest, HttpReply reply) {
  inference::ServerMetadataResponse m;
  FillServerMetadata(&m);
  reply.Send(Json(ProtoToJson(m)));
}

void Live(const RouteContext&, HttpRequest, HttpReply reply) { reply.Send(Readiness(true)); }

void Ready(const RouteContext& context, HttpRequest, HttpReply reply) {
  reply.Send(Readiness(context.engine->Ready()));
}

void RepositoryIndex(const RouteContext& context, HttpRequest, HttpReply reply) {
  inference::RepositoryIndexResponse m;
  FillRepositoryIndex(*context.engine, &m);
  reply.Send(Json(ProtoToJson(m)["models"]));  // Triton answers the array
}

void AllStatistics(const RouteContext& context, HttpRequest, HttpReply reply) {
  inference::ModelStatisticsResponse m;
  reply.Send(ProtoOrError(FillModelStatistics(*context.engine, "", "", &m), m));
}

// The routes at fixed paths (server/http/route_table.h). per_model: TEI's
// routes and OpenAI's embeddings, which a client pointed at a TEI server
// calls; the whole server's (metrics, KServe's, Cohere's, whose bodies name
// their model) only at the top level.
constexpr RouteMethod kGet = RouteMethod::kGet;
constexpr RouteMethod kPostJson = RouteMethod::kPostJson;
constexpr ErrorShape kTei = ErrorShape::kTei;
constexpr ErrorShape kKserve = ErrorShape::kKserve;
constexpr RouteAccess kOpen = RouteAccess::kOpen;  // no API key needed
constexpr RouteEntry kRoutes[] = {
    // TEI's (server/http/tei_routes.h, scoring_routes.h).
    {kGet, "/", kTei, true, TeiHealth, kOpen},
    {kPostJson, "/", kTei, true, OnEngine<HandleTeiRoot>},
    {kPostJson, "/invocations", kTei, true, OnEngine<HandleTeiRoot>},  // SageMaker's POST /
    {kGet, "/health", kTei, true, TeiHealth, kOpen},
    {kGet, "/ping", kTei, true, TeiHealth, kOpen},  // SageMaker's
    {kGet, "/info", kTei, true, TeiInfoRoute},
    {kPostJson, "/embed", kTei, true, OnEngine<HandleTeiEmbed>},
    {kPostJson, "/embed_all", kTei, true, OnEngine<HandleTeiEmbedAll>},
    {kPostJson, "/embed_sparse", kTei, true, OnEngine<HandleTeiEmbedSparse>},
    {kPostJson, "/similarity", kTei, true, OnEngine<HandleTeiSimilarity>},
    {kPostJson, "/tokenize", kTei, true, OnEngine<HandleTeiTokenize>},
    {kPostJson, "/decode", kTei, true, OnEngine<HandleTeiDecode>},
    {kPostJson, "/rerank", kTei, true, Scoring<ScoringApi::kTeiRerank>},
    {kPostJson, "/predict", kTei, true, Scoring<ScoringApi::kTeiPredict>},
    // OpenAI's embeddings (server/http/openai_embeddings.h), also at TEI's
    // /embeddings.
    {kPostJson, "/v1/embeddings", ErrorShape::kOpenAi, true, OnEngine<HandleEmbeddings>},
    {kPostJson, "/embeddings", ErrorShape::kOpenAi, true, OnEngine<HandleEmbeddings>},
    // Cohere's rerank.
    {kPostJson, "/v1/rerank", ErrorShape::kCohere, false, Scoring<ScoringApi::kCohereV1>},
    {kPostJson, "/v2/rerank", ErrorShape::kCohere, false, Scoring<ScoringApi::kCohereV2>},
    // Prometheus (server/metrics.h): the whole server's, each model's series
    // labelled with its name.
    {kGet, "/metrics", kKserve, false, Metrics, kOpen},
    // KServe v2's without parameters.
    {kGet, "/v2", kKserve, false, ServerMetadata},
    {kGet, "/v2/", kKserve, false, ServerMetadata},
    {kGet, "/v2/health/live", kKserve, false, Live, kOpen},
    {kGet, "/v2/health/ready", kKserve, false, Ready, kOpen},
    {RouteMethod::kPost, "/v2/repository/index", kKserve, false, RepositoryIndex},
    {kGet, "/v2/models/stats", kKserve, false, AllStatistics},
};

}  // namespace

HttpHandler MakeRestHandler(Engine* engine, const NvmlTelemetry* gpu, const ApiKey* api_key) {
  return [context = RouteContext{engine, gpu, api_key}](HttpRequest request, HttpReply reply) {
    DispatchRoute(kRoutes, ParameterRoute, context, std::move(request), std::move(reply));
  };
}

}  // namespace infer
