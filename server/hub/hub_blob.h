// Downloading one file of a repository into the cache's blobs/ folder, so
// that nothing corrupt is ever served:
//   - the bytes go to blobs/<etag>.incomplete, under the flock of
//     .locks/models--ORG--NAME/<etag>.lock (huggingface_hub's lock, so two
//     servers, or a server and huggingface_hub, never write one blob at
//     once; the second finds the blob whole when it gets the lock);
//   - an interrupted transfer resumes where the file ends with a Range
//     request: within this run (up to 5 tries, with back-off), and in the
//     next run when the process died (the .incomplete file stays);
//   - the file is renamed to blobs/<etag> only when its size is the hub's
//     and its hash is the one the hub gave: SHA-256 for LFS files (the
//     ETag, and the listing's lfs.oid), git's blob SHA-1 for the others
//     (their ETag). A mismatch deletes the .incomplete file.
//
// Thread-safe (state is on disk, kept apart by the lock).
#ifndef INFER_SERVER_HUB_HUB_BLOB_H_
#define INFER_SERVER_HUB_HUB_BLOB_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/hub/hub_cache.h"
#include "server/hub/transfer_progress.h"

namespace infer::hub {

struct BlobSource {
  std::string path;  // the file's path in the repository (for messages)
  std::string url;   // where its bytes are (after the hub's redirect)
  std::string token;
  std::string etag;  // the blob's name, normalised
  int64_t size = 0;
  // The expected digest, lowercase hex: a SHA-256 (64 digits) of the bytes,
  // or git's blob SHA-1 (40 digits) of "blob <size>\0" and the bytes.
  std::string digest;
};

// blobs/<etag> whole and checked: downloaded as above unless it is already
// there. DATA_LOSS when the bytes do not match the size or digest;
// UNAVAILABLE when the transfer fails 5 times; PERMISSION_DENIED when the
// cache cannot be written; another code with the server's answer when it
// refuses (an HTTP status other than 200/206 with a 4xx).
absl::Status FetchBlob(const RepoCache& cache, const BlobSource& source,
                       TransferProgress* progress);

// The lowercase hex digest of the file at `path` as BlobSource::digest
// describes it (by the digest's length: 64 SHA-256, 40 git blob SHA-1).
// INVALID_ARGUMENT for another length, NOT_FOUND when unreadable.
absl::StatusOr<std::string> FileDigest(const std::string& path, size_t digest_length);

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_HUB_BLOB_H_
