// The REST front end's routes over an Engine, on an HttpServer
// (server/http/http_server.h):
//
//   KServe v2 REST, as Triton serves it on port 8000:
//     GET  /v2                              server metadata
//     GET  /v2/health/live, /v2/health/ready          200, or 400 when not
//     GET  /v2/models/{m}[/versions/{v}]              model metadata
//     GET  /v2/models/{m}[/versions/{v}]/ready        200, or 400 when not
//     GET  /v2/models/{m}[/versions/{v}]/config       Triton's ModelConfig
//     GET  /v2/models[/{m}[/versions/{v}]]/stats      statistics
//     POST /v2/models/{m}[/versions/{v}]/infer        inference (JSON, and
//                                                     Triton's binary data)
//     POST /v2/repository/index                       the loaded models
//   OpenAI: POST /v1/embeddings, GET /v1/models[/{m}]
//     (server/http/openai_embeddings.h)
//   Rerank and classification: TEI's POST /rerank and /predict, Cohere's
//     POST /v1/rerank and /v2/rerank (server/http/scoring_routes.h), in
//     their own error shapes
//   Prometheus: GET /metrics (server/metrics.h)
//   A model's base path: TEI's routes and OpenAI's embeddings at
//     /models/{name}/..., for that model alone, as a single-model TEI
//     server answers them (server/http/route_table.h)
//
// The routes at fixed paths are one table (kRoutes: method, path, error
// shape, handler, served per model or not; server/http/route_table.h).
// Errors are {"error": "<message>"} (OpenAI's shape under /v1) with the
// message the gRPC front end gives for the same request, and the status of
// HttpStatusFor. An unknown path is 404, a known path with another method
// 405 (with Allow). A body with a Content-Encoding, or a Content-Type other
// than JSON (or, for inference, application/octet-stream), is refused with
// 415 before it is parsed.
//
// With an API key (not null and enabled), every route but the health checks
// and /metrics needs it (server/http/route_table.h).
//
// Ownership: the Engine, the telemetry and the key (both may be null) are
// borrowed and must outlive the server the handler runs in.
#ifndef INFER_SERVER_HTTP_HTTP_ROUTES_H_
#define INFER_SERVER_HTTP_HTTP_ROUTES_H_

#include "engine/engine.h"
#include "runtime/nvml_telemetry.h"
#include "server/api_key.h"
#include "server/http/http_server.h"

namespace infer {

HttpHandler MakeRestHandler(Engine* engine, const NvmlTelemetry* gpu,
                            const ApiKey* api_key = nullptr);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_HTTP_ROUTES_H_
