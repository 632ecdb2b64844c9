#include "server/http/http_routes.h"

#include <google/protobuf/message.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/quote.h"
#include "server/http/http_infer_codec.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/rest_request.h"
#include "server/http/scoring_routes.h"
#include "server/http/tei_routes.h"
#include "server/kserve/kserve_service.h"
#include "server/metrics.h"

namespace infer {
namespace {

using nlohmann::json;

HttpResponse Error(const absl::Status& status) {
  return {HttpStatusFor(status.code()), "application/json",
          DumpJson(json{{"error", std::string(status.message())}})};
}

HttpResponse Json(const json& value) { return {200, "application/json", DumpJson(value)}; }

HttpResponse ProtoOrError(const absl::Status& status, const google::protobuf::Message& message) {
  if (!status.ok()) return Error(status);
  return Json(ProtoToJson(message));
}

// 200 with no body, or 400 (Triton's answer for "not ready").
HttpResponse Readiness(bool ready) { return {ready ? 200 : 400, "application/json", ""}; }

HttpResponse MethodNotAllowed(const char* allowed, const HttpRequest& request) {
  HttpResponse r = Error(absl::InvalidArgumentError(
      absl::StrCat("method ", Quote(request.method), " is not allowed on ", Quote(request.path),
                   "; use ", allowed)));
  r.status = 405;
  r.headers.emplace_back("Allow", allowed);
  return r;
}

// Percent-decoding of one path segment; false when malformed.
bool DecodeSegment(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size()) return false;
    for (int k = 1; k <= 2; ++k) {
      const char c = in[i + k];
      const int d = absl::ascii_isdigit(c)   ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
      if (d < 0) return false;
      value = value * 16 + d;
    }
    out->push_back(static_cast<char>(value));
    i += 2;
  }
  return true;
}

// What is wrong with the body's Content-Type or Content-Encoding (answered
// 415 in the route's error shape); nullopt when it is JSON (or, with
// `octet_stream`, binary) and unencoded.
std::optional<absl::Status> BodyTypeProblem(const HttpRequest& request, bool octet_stream) {
  const absl::string_view encoding = request.Header("content-encoding");
  if (!encoding.empty() && !absl::EqualsIgnoreCase(encoding, "identity")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Content-Encoding ", Quote(encoding), " is not supported; send the body uncompressed"));
  }
  absl::string_view type = request.Header("content-type");
  type = absl::StripAsciiWhitespace(type.substr(0, type.find(';')));
  // curl -d sends application/x-www-form-urlencoded unless told otherwise,
  // and Triton's own curl examples rely on the body being read as JSON.
  if (type.empty() || absl::EqualsIgnoreCase(type, "application/json") ||
      absl::EqualsIgnoreCase(type, "application/x-www-form-urlencoded") ||
      (octet_stream && absl::EqualsIgnoreCase(type, "application/octet-stream"))) {
    return std::nullopt;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Content-Type ", Quote(type), " is not supported; send application/json",
                   octet_stream ? " (or application/octet-stream with binary data)" : ""));
}

HttpResponse WithStatus(HttpResponse r, int status) {
  r.status = status;
  return r;
}

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
    if (request.method != "POST") return reply.Send(MethodNotAllowed("POST", request));
    if (auto problem = BodyTypeProblem(request, /*octet_stream=*/true)) {
      return reply.Send(WithStatus(Error(*problem), 415));
    }
    return Infer(engine, model, version, std::move(request), std::move(reply));
  }
  if (!get) return reply.Send(MethodNotAllowed("GET", request));
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

void Route(Engine* engine, const NvmlTelemetry* gpu, HttpRequest request, HttpReply reply) {
  const bool get = request.method == "GET" || request.method == "HEAD";
  std::vector<absl::string_view> parts = absl::StrSplit(request.path, '/');
  // "/v2/models/x" splits into "", "v2", "models", "x".
  if (parts.size() < 2 || !parts[0].empty()) {
    return reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(request.path)))));
  }
  parts.erase(parts.begin());
  const std::string path = request.path;
  // Rerank and classification in TEI's and Cohere's shapes
  // (server/http/scoring_routes.h).
  static constexpr std::pair<const char*, ScoringApi> kScoring[] = {
      {"/rerank", ScoringApi::kTeiRerank},
      {"/predict", ScoringApi::kTeiPredict},
      {"/v1/rerank", ScoringApi::kCohereV1},
      {"/v2/rerank", ScoringApi::kCohereV2}};
  for (const auto& [route, api] : kScoring) {
    if (path != route) continue;
    if (request.method != "POST") {
      return reply.Send(WithStatus(
          ScoringError(api, absl::InvalidArgumentError(absl::StrCat(
                                "method ", Quote(request.method), " is not allowed; use POST"))),
          405));
    }
    if (auto problem = BodyTypeProblem(request, /*octet_stream=*/false)) {
      return reply.Send(WithStatus(ScoringError(api, *problem), 415));
    }
    return HandleScoring(api, engine, std::move(request), std::move(reply));
  }
  // TEI's embedding routes (server/http/tei_routes.h); GET /, /health and
  // /ping are TEI's health check.
  using TeiHandler = void (*)(Engine*, HttpRequest, HttpReply);
  static constexpr std::pair<const char*, TeiHandler> kTei[] = {
      {"/embed", HandleTeiEmbed},
      {"/embed_all", HandleTeiEmbedAll},
      {"/embed_sparse", HandleTeiEmbedSparse},
      {"/similarity", HandleTeiSimilarity},
      {"/tokenize", HandleTeiTokenize},
      {"/decode", HandleTeiDecode},
      {"/", HandleTeiRoot},
      {"/invocations", HandleTeiRoot}};  // TEI's SageMaker route: POST /
  const auto tei_error = [](const absl::Status& status, int http) {
    return WithStatus(ScoringError(ScoringApi::kTeiPredict, status), http);
  };
  if ((path == "/" && get) || path == "/health" || path == "/ping") {
    if (!get) return reply.Send(MethodNotAllowed("GET", request));
    if (engine->Ready()) return reply.Send(HttpResponse{200, "application/json", ""});
    return reply.Send(
        tei_error(absl::UnavailableError("the server is not ready (draining or starting)"), 503));
  }
  if (path == "/info") {
    if (!get) return reply.Send(MethodNotAllowed("GET", request));
    std::string model;
    for (absl::string_view param : absl::StrSplit(request.query, '&')) {
      if (absl::ConsumePrefix(&param, "model=") && !DecodeSegment(param, &model)) {
        return reply.Send(
            tei_error(absl::InvalidArgumentError("malformed percent-encoding in the query"), 400));
      }
    }
    return reply.Send(TeiInfo(*engine, model));
  }
  for (const auto& [route, handler] : kTei) {
    if (path != route) continue;
    if (request.method != "POST") {
      return reply.Send(
          tei_error(absl::InvalidArgumentError(absl::StrCat("method ", Quote(request.method),
                                                            " is not allowed; use POST")),
                    405));
    }
    if (auto problem = BodyTypeProblem(request, /*octet_stream=*/false)) {
      return reply.Send(tei_error(*problem, 415));
    }
    return handler(engine, std::move(request), std::move(reply));
  }
  if (path == "/metrics") {
    if (!get) return reply.Send(MethodNotAllowed("GET", request));
    return reply.Send(MetricsResponse(*engine, gpu));
  }
  // OpenAI's embeddings, also at TEI's /embeddings.
  if (path == "/v1/embeddings" || path == "/embeddings") {
    if (request.method != "POST") {
      HttpResponse r = OpenAiError(absl::InvalidArgumentError(
          absl::StrCat("method ", Quote(request.method), " is not allowed; use POST")));
      r.status = 405;
      r.headers.emplace_back("Allow", "POST");
      return reply.Send(std::move(r));
    }
    if (auto problem = BodyTypeProblem(request, /*octet_stream=*/false)) {
      return reply.Send(WithStatus(OpenAiError(*problem), 415));
    }
    return HandleEmbeddings(engine, std::move(request), std::move(reply));
  }
  if (parts[0] == "v2") {
    if (path == "/v2" || path == "/v2/") {
      if (!get) return reply.Send(MethodNotAllowed("GET", request));
      inference::ServerMetadataResponse m;
      FillServerMetadata(&m);
      return reply.Send(Json(ProtoToJson(m)));
    }
    if (path == "/v2/health/live" || path == "/v2/health/ready") {
      if (!get) return reply.Send(MethodNotAllowed("GET", request));
      return reply.Send(Readiness(path == "/v2/health/live" || engine->Ready()));
    }
    if (path == "/v2/repository/index") {
      if (request.method != "POST") return reply.Send(MethodNotAllowed("POST", request));
      inference::RepositoryIndexResponse m;
      FillRepositoryIndex(*engine, &m);
      return reply.Send(Json(ProtoToJson(m)["models"]));  // Triton answers the array
    }
    if (path == "/v2/models/stats") {
      if (!get) return reply.Send(MethodNotAllowed("GET", request));
      inference::ModelStatisticsResponse m;
      return reply.Send(ProtoOrError(FillModelStatistics(*engine, "", "", &m), m));
    }
    if (parts.size() >= 3 && parts[1] == "models" && !parts[2].empty()) {
      parts.erase(parts.begin(), parts.begin() + 2);
      return ModelRoute(engine, parts, std::move(request), std::move(reply));
    }
  } else if (parts[0] == "v1") {
    if (parts.size() >= 2 && parts[1] == "models" && parts.size() <= 3) {
      if (!get) return reply.Send(MethodNotAllowed("GET", request));
      std::string model;
      if (parts.size() == 3 && !DecodeSegment(parts[2], &model)) {
        return reply.Send(OpenAiError(absl::InvalidArgumentError("malformed percent-encoding")));
      }
      return reply.Send(ListOpenAiModels(*engine, model));
    }
    return reply.Send(OpenAiError(absl::NotFoundError(absl::StrCat("no route ", Quote(path)))));
  }
  reply.Send(Error(absl::NotFoundError(absl::StrCat("no route ", Quote(path)))));
}

}  // namespace

HttpHandler MakeRestHandler(Engine* engine, const NvmlTelemetry* gpu) {
  return [engine, gpu](HttpRequest request, HttpReply reply) {
    Route(engine, gpu, std::move(request), std::move(reply));
  };
}

}  // namespace infer
