// The Hugging Face Hub's tree listing (server/hub/hub_files.h), as a hub,
// a mirror named by HF_ENDPOINT, or whatever answers there sends it: any
// bytes are either a listing whose every path stays inside the snapshot
// folder, or refused with INVALID_ARGUMENT. Nothing else may escape: an
// exception, a crash, or a path with a ".." part or a leading '/'.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "server/hub/hub_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<infer::hub::RepoFile>> tree = infer::hub::ParseTreeListing(text);
  if (!tree.ok()) {
    if (tree.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  for (const infer::hub::RepoFile& f : *tree) {
    if (f.path.empty() || f.path[0] == '/' || f.path == ".." || absl::StartsWith(f.path, "../") ||
        absl::StrContains(f.path, "/../") || absl::EndsWith(f.path, "/..") || f.size < 0) {
      __builtin_trap();  // a path out of the snapshot was accepted
    }
  }
  (void)infer::hub::MetadataFiles(*tree);
  return 0;
}
