// Which files of a model repository on the Hugging Face Hub a served model
// needs, from the hub's listing of the repository's tree: what the folder
// loader (server/kserve/model_repository.cc and the files it reads) opens,
// and nothing else: no PyTorch, ONNX or OpenVINO copies of the weights, no
// other precision's files, no images of the model card.
//
// In two steps, since some files say which others are needed:
//   1. MetadataFiles: config.json, the tokenizer's files, the
//      sentence-transformers files (modules.json, sentence_bert_config.json,
//      config_sentence_transformers.json), the model card (README.md, whose
//      metadata says whether embeddings may be shortened) and the
//      safetensors index when the weights are sharded;
//   2. ContentFiles, once those are on disk: the weights (model.safetensors,
//      or the shards the index's weight_map names) and the files of each
//      module modules.json lists in a folder of its own (1_Pooling,
//      2_Dense, ...): their JSON settings and safetensors weights.
//
// Thread-safe (pure functions, and reads of files).
#ifndef INFER_SERVER_HUB_HUB_FILES_H_
#define INFER_SERVER_HUB_HUB_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer::hub {

// One file of the hub's tree listing
// (GET /api/models/{repo}/tree/{commit}?recursive=true).
struct RepoFile {
  std::string path;
  int64_t size = 0;
  std::string blob_id;     // git's blob SHA-1 ("oid")
  std::string lfs_sha256;  // for a file stored in LFS: its SHA-256; else empty
};

// One page of the listing: a JSON array of {"type": "file" | "directory",
// "path", "size", "oid", "lfs": {"oid", "size"}}; directories are skipped.
// INVALID_ARGUMENT when it is not that shape, or a path fails
// CheckRepoPath (a listing must not name files outside the snapshot).
absl::StatusOr<std::vector<RepoFile>> ParseTreeListing(absl::string_view json);

// Step 1 above: the listing's files the loader may read before the weights
// are chosen, in listing order. FAILED_PRECONDITION when there is no
// config.json (then it is no Hugging Face model folder).
absl::StatusOr<std::vector<const RepoFile*>> MetadataFiles(const std::vector<RepoFile>& tree);

// Step 2: the weights and module files, given the folder where the files of
// step 1 are. FAILED_PRECONDITION naming what there is instead when the
// repository has no safetensors weights, or when a shard the index names is
// not in the listing; INVALID_ARGUMENT when the index or modules.json
// cannot be read.
// `extra_folders`: module folders the server reads beyond those modules.json
// lists (--dense-path's).
absl::StatusOr<std::vector<const RepoFile*>> ContentFiles(
    const std::vector<RepoFile>& tree, const std::string& metadata_dir,
    const std::vector<std::string>& extra_folders = {});

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_HUB_FILES_H_
