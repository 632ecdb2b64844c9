// The REST front end's routes at fixed paths as one table of RouteEntry
// (method, path, error shape, handler, and whether a model's base path
// serves it), and the dispatch over it. The table itself and the routes
// with parameters in the path (KServe's /v2/models/{m}/..., OpenAI's
// /v1/models/{m}) are server/http/http_routes.cc's.
//
// A path in the table answers 405 (with Allow) for a method it lacks, and,
// on a route that reads a JSON body, 415 for a body that is not JSON or is
// encoded (BodyTypeProblem), both in the route's error shape; else its
// handler answers.
//
// A model's base path, /models/{name}: each per_model route at
// /models/{name}<path> (/models/{name} and /models/{name}/ are "/"), so
// that a TEI client pointed at it (Hugging Face's InferenceClient(base_url=
// "http://host:8000/models/NAME")) talks to one model of several as to a
// single-model TEI server. The handler gets {name}, percent-decoded, as the
// request's path parameter kModelPathParam (PathModel,
// server/http/openai_embeddings.h) and answers with that model
// (ChooseModel). Refused in TEI's shape ({"error", "error_type"}): an
// unknown {name} 404 (the engine's message, naming the loaded models), a
// route served for the whole server only (/metrics, Cohere's rerank,
// KServe's) or no route at all 404 naming it, a malformed {name} 422.
//
// With an API key (RouteContext::api_key, server/api_key.h), a request
// without `Authorization: Bearer KEY` gets 401 in the route's error shape
// (with WWW-Authenticate: Bearer) before anything else is looked at, on
// every route but the open ones (RouteAccess::kOpen: the health checks and
// /metrics, as TEI leaves them open); under /models/{name} every route
// needs it, so that a stranger cannot learn which models are loaded.
//
// Thread-safe: the table is constant, the context borrowed.
#ifndef INFER_SERVER_HTTP_ROUTE_TABLE_H_
#define INFER_SERVER_HTTP_ROUTE_TABLE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "runtime/nvml_telemetry.h"
#include "server/api_key.h"
#include "server/http/http_server.h"

namespace infer {

// The JSON shape of a route's errors.
enum class ErrorShape {
  kKserve,  // {"error": "<message>"} (Triton's)
  kTei,     // {"error", "error_type"} with TEI's statuses (ScoringError)
  kCohere,  // {"message"}
  kOpenAi,  // {"error": {"message", "type", "param", "code"}}
};

enum class RouteMethod {
  kGet,       // GET (and HEAD)
  kPost,      // POST; the body is not read as JSON
  kPostJson,  // POST with a JSON body (415 for another Content-Type)
};

// Whether a route needs the server's API key, when it has one.
enum class RouteAccess {
  kKey,   // everything that touches a model
  kOpen,  // health checks and /metrics: probed by load balancers and scrapers
};

// What every handler is given beside its request.
struct RouteContext {
  Engine* engine = nullptr;            // borrowed; outlives the server
  const NvmlTelemetry* gpu = nullptr;  // borrowed; may be null
  const ApiKey* api_key = nullptr;     // borrowed; may be null (no key)
};

using RouteHandler = void (*)(const RouteContext& context, HttpRequest request, HttpReply reply);

struct RouteEntry {
  RouteMethod method;
  const char* path;  // exact: "/embed"
  ErrorShape shape;  // of the route's refusals, the router's included
  bool per_model;    // also served at /models/{name}<path>
  RouteHandler handle;
  RouteAccess access = RouteAccess::kKey;
};

// Answers `request`: from `table` when its path is there, under a model's
// base path when it starts with "/models/", else with `other` (the routes
// with parameters, and 404; they need the key).
void DispatchRoute(absl::Span<const RouteEntry> table, RouteHandler other,
                   const RouteContext& context, HttpRequest request, HttpReply reply);

// An error in `shape` with HTTP status `http` (0: the shape's own status
// for the code: HttpStatusFor, or TEI's).
HttpResponse ShapedError(ErrorShape shape, const absl::Status& status, int http = 0);
// 405 in `shape` naming the method, the path and `allowed`, with Allow.
HttpResponse MethodNotAllowed(ErrorShape shape, absl::string_view allowed,
                              const HttpRequest& request);
// What is wrong with the body's Content-Type or Content-Encoding (answered
// 415 in the route's error shape); nullopt when it is JSON (or, with
// `octet_stream`, binary) and unencoded.
std::optional<absl::Status> BodyTypeProblem(const HttpRequest& request, bool octet_stream);
// Percent-decoding of one path segment (or query value); false when
// malformed.
bool DecodeSegment(absl::string_view in, std::string* out);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_ROUTE_TABLE_H_
