#include "server/http/route_table.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/scoring_routes.h"

namespace infer {
namespace {

constexpr absl::string_view kModelsPrefix = "/models/";

// Whether `request` may pass: no key, or it carries the key; else it is
// counted and answered 401 in `shape`.
bool Authorized(const RouteContext& context, const HttpRequest& request, ErrorShape shape,
                HttpReply* reply) {
  if (context.api_key == nullptr || context.api_key->Allows(request.Header("authorization"))) {
    return true;
  }
  context.api_key->CountRefusal(ApiKey::kHttp);
  HttpResponse r = ShapedError(
      shape,
      absl::UnauthenticatedError(
          "this server needs an API key: send it as the header Authorization: Bearer KEY"),
      401);
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  reply->Send(std::move(r));
  return false;
}

bool Accepts(const RouteEntry& entry, const HttpRequest& request) {
  if (entry.method == RouteMethod::kGet) {
    return request.method == "GET" || request.method == "HEAD";
  }
  return request.method == "POST";
}

// Answers `request` with the entry of `at` (one path's entries, not empty)
// that takes its method; 405 naming theirs when none does.
void Serve(const std::vector<const RouteEntry*>& at, const RouteContext& context,
           HttpRequest request, HttpReply reply) {
  bool get = false, post = false;
  for (const RouteEntry* entry : at) {
    if (!Accepts(*entry, request)) {
      (entry->method == RouteMethod::kGet ? get : post) = true;
      continue;
    }
    if (entry->access != RouteAccess::kOpen &&
        !Authorized(context, request, entry->shape, &reply)) {
      return;
    }
    if (entry->method == RouteMethod::kPostJson) {
      if (auto problem = BodyTypeProblem(request, /*octet_stream=*/false)) {
        return reply.Send(ShapedError(entry->shape, *problem, 415));
      }
    }
    return entry->handle(context, std::move(request), std::move(reply));
  }
  const char* allowed = get && post ? "GET, POST" : get ? "GET" : "POST";
  reply.Send(MethodNotAllowed(at[0]->shape, allowed, request));
}

// /models/{name}<path>: `path`'s per-model entries, for model {name}.
void ServeModelPath(absl::Span<const RouteEntry> table, const RouteContext& context,
                    HttpRequest request, HttpReply reply) {
  absl::string_view rest = request.path;
  rest.remove_prefix(kModelsPrefix.size());
  const size_t slash = rest.find('/');
  const absl::string_view segment = rest.substr(0, slash);
  const absl::string_view path = slash == absl::string_view::npos ? "/" : rest.substr(slash);
  const auto refuse = [&](const absl::Status& status) {
    reply.Send(ShapedError(ErrorShape::kTei, status));
  };
  if (!Authorized(context, request, ErrorShape::kTei, &reply)) return;
  std::string name;
  if (segment.empty()) {
    return refuse(absl::NotFoundError(absl::StrCat(
        "no route ", Quote(request.path), "; a model's routes are under /models/{name}/")));
  }
  if (!DecodeSegment(segment, &name)) {
    return refuse(absl::InvalidArgumentError("malformed percent-encoding in the path"));
  }
  if (absl::StatusOr<const ModelSpec*> spec = context.engine->GetModelSpec(name); !spec.ok()) {
    return refuse(spec.status());
  }
  std::vector<const RouteEntry*> at;
  bool whole_server = false;
  for (const RouteEntry& entry : table) {
    if (entry.path != path) continue;
    if (entry.per_model) {
      at.push_back(&entry);
    } else {
      whole_server = true;
    }
  }
  if (at.empty()) {
    return refuse(absl::NotFoundError(
        whole_server ? absl::StrCat(Quote(path), " is served for the whole server, not per model: ",
                                    "use ", Quote(path), " at the top level")
                     : absl::StrCat("no route ", Quote(request.path))));
  }
  request.path_params.emplace_back(kModelPathParam, std::move(name));
  Serve(at, context, std::move(request), std::move(reply));
}

}  // namespace

void DispatchRoute(absl::Span<const RouteEntry> table, RouteHandler other,
                   const RouteContext& context, HttpRequest request, HttpReply reply) {
  if (absl::StartsWith(request.path, kModelsPrefix)) {
    return ServeModelPath(table, context, std::move(request), std::move(reply));
  }
  std::vector<const RouteEntry*> at;
  for (const RouteEntry& entry : table) {
    if (entry.path == request.path) at.push_back(&entry);
  }
  if (at.empty()) {
    const ErrorShape shape =
        absl::StartsWith(request.path, "/v1/") ? ErrorShape::kOpenAi : ErrorShape::kKserve;
    if (!Authorized(context, request, shape, &reply)) return;
    return other(context, std::move(request), std::move(reply));
  }
  Serve(at, context, std::move(request), std::move(reply));
}

HttpResponse ShapedError(ErrorShape shape, const absl::Status& status, int http) {
  HttpResponse r;
  switch (shape) {
    case ErrorShape::kKserve:
      r = {HttpStatusFor(status.code()), "application/json",
           DumpJson(nlohmann::json{{"error", std::string(status.message())}})};
      break;
    case ErrorShape::kTei:
      r = ScoringError(ScoringApi::kTeiPredict, status);
      break;
    case ErrorShape::kCohere:
      r = ScoringError(ScoringApi::kCohereV2, status);
      break;
    case ErrorShape::kOpenAi:
      r = OpenAiError(status);
      break;
  }
  if (http != 0) r.status = http;
  return r;
}

HttpResponse MethodNotAllowed(ErrorShape shape, absl::string_view allowed,
                              const HttpRequest& request) {
  HttpResponse r = ShapedError(shape,
                               absl::InvalidArgumentError(absl::StrCat(
                                   "method ", Quote(request.method), " is not allowed on ",
                                   Quote(request.path), "; use ", allowed)),
                               405);
  r.headers.emplace_back("Allow", std::string(allowed));
  return r;
}

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

}  // namespace infer
