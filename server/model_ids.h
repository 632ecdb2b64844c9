// What infer-server does with --model-id before the engine starts: each
// [NAME=]ORG/NAME becomes a --model NAME=FOLDER, the folder being the hub's
// snapshot in the Hugging Face cache (server/hub/hub_fetch.h) or, as TEI's
// --model-id takes one, a local folder; and the other names the models
// answer to (Engine::AddAlias).
#ifndef INFER_SERVER_MODEL_IDS_H_
#define INFER_SERVER_MODEL_IDS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/server_flags.h"

namespace infer {

// Moves flags->model_ids into flags->models (fetching from the hub as
// needed; flags->model_ids and flags->hf_token are cleared), applies TEI's
// --served-model-name, and returns the aliases as {alias, model name}: a
// hub model's id ("BAAI/bge-m3" beside "bge-m3"), and --served-model-name
// when it has a '/' (a model's own name cannot: it is a path segment of
// /v2/models/{name}). The first failure, in one line naming the model and
// the reason (FetchHubModel's).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ResolveModelIds(
    ServerFlags* flags);

}  // namespace infer

#endif  // INFER_SERVER_MODEL_IDS_H_
