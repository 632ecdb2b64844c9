// A model on the Hugging Face Hub, by its id, made a folder the server can
// load (`--model-id ORG/NAME`): the revision resolved to a commit, the
// files a served model needs (server/hub/hub_files.h) downloaded into the
// huggingface_hub cache (server/hub/hub_cache.h, server/hub/hub_blob.h),
// and the snapshot folder of that commit returned.
//
// As huggingface_hub does it:
//   - online: GET {endpoint}/api/models/{repo}/revision/{revision} (the
//     commit), GET .../tree/{commit}?recursive=true (the files, their sizes
//     and hashes, page after page), then per missing file HEAD
//     {endpoint}/{repo}/resolve/{commit}/{path} (its ETag, X-Repo-Commit,
//     and for LFS files X-Linked-Etag, X-Linked-Size and the storage URL it
//     redirects to) and the download. Files already in the snapshot are
//     not fetched again.
//   - offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to 1/ON/YES/TRUE):
//     the cache alone, no request. The same when the hub cannot be reached
//     (no connection, a 5xx, a 429) or refuses (401, 403, an unknown
//     repository) but the cache holds the revision: served from the cache
//     with a warning naming why. An unknown revision is always refused.
//   A cached copy must be complete: config.json, and the weights its files
//   name.
//
// Thread-safe; two processes on one cache are kept apart by its locks.
#ifndef INFER_SERVER_HUB_HUB_FETCH_H_
#define INFER_SERVER_HUB_HUB_FETCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infer::hub {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::string token;                                // never logged nor put in an error; empty: none
  std::string cache_dir;
  bool offline = false;
  // Module folders to fetch beyond those modules.json lists (--dense-path).
  std::vector<std::string> extra_folders;
};

// The options from the environment, as huggingface_hub reads it: HF_ENDPOINT,
// HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, the cache (CacheDirFromEnvironment).
// The token: `token` (--hf-token or HF_TOKEN), else the first line of
// `token_file` (--hf-token-file), else HUGGING_FACE_HUB_TOKEN, else the file
// `hf auth login` writes ($HF_TOKEN_PATH, else $HF_HOME/token) when it
// exists. INVALID_ARGUMENT when both `token` and `token_file` are given, or
// the token has a character a header cannot carry; NOT_FOUND when
// `token_file` cannot be read.
absl::StatusOr<HubOptions> HubOptionsFromEnvironment(const std::string& token,
                                                     const std::string& token_file);

struct HubModel {
  std::string folder;  // the snapshot folder: <cache>/models--ORG--NAME/snapshots/<commit>
  std::string commit;
};

// The model `repo_id` at `revision` (a branch, tag or commit), as above.
// On failure the message names the repository and the reason in one line:
// INVALID_ARGUMENT for a malformed id or revision; NOT_FOUND for an unknown
// repository or revision (or a private or gated one without a token),
// UNAUTHENTICATED for a token the hub refuses, PERMISSION_DENIED for a
// 403 (a gated repository whose conditions are not accepted) or a cache that
// cannot be written, FAILED_PRECONDITION for a repository without
// config.json or safetensors weights, UNAVAILABLE when the hub cannot be
// reached and the cache has no copy, DATA_LOSS when a file's bytes do not
// match the hub's hash.
absl::StatusOr<HubModel> FetchHubModel(const std::string& repo_id, const std::string& revision,
                                       const HubOptions& options);

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_HUB_FETCH_H_
