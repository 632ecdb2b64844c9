// The Hugging Face Hub's cache on disk, in huggingface_hub's own layout, so
// that this server and huggingface_hub (and so transformers,
// sentence-transformers and the `hf` command) share one cache: a model one
// of them downloaded, the other finds.
//
//   <cache>/CACHEDIR.TAG
//   <cache>/models--ORG--NAME/blobs/<etag>            each file's bytes, named by
//                                                     its ETag (SHA-256 for LFS
//                                                     files, git's blob SHA-1
//                                                     for the others)
//   <cache>/models--ORG--NAME/refs/<revision>         the commit a branch or tag
//                                                     named when last resolved
//   <cache>/models--ORG--NAME/snapshots/<commit>/<path>
//                                                     a relative symlink to its blob
//   <cache>/.locks/models--ORG--NAME/<etag>.lock      flock(2)ed while a blob is
//                                                     written (huggingface_hub's
//                                                     filelock takes the same lock)
//
// A blob is only ever created whole (renamed from `<etag>.incomplete` once
// its hash is checked, server/hub/hub_fetch.cc), so a blob that exists is
// complete.
//
// Thread-safe: no shared state; concurrent processes are kept apart by the
// lock files and by writing refs through a rename.
#ifndef INFER_SERVER_HUB_HUB_CACHE_H_
#define INFER_SERVER_HUB_HUB_CACHE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer::hub {

// The environment variable `name`, empty when unset.
std::string Env(const char* name);

// Where huggingface_hub keeps its cache, from the environment as it reads
// it: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string CacheDirFromEnvironment();
// $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
// (where huggingface_hub's `hf auth login` leaves its token file).
std::string HfHomeFromEnvironment();

// INVALID_ARGUMENT unless `repo_id` is a hub model id: NAME or ORG/NAME,
// each part of letters, digits, '-', '_' and '.', not starting or ending in
// '-' or '.', without "--" or "..", 96 characters at most (the hub's own
// rule, which huggingface_hub checks too).
absl::Status CheckRepoId(absl::string_view repo_id);
// INVALID_ARGUMENT unless `revision` is a branch, tag or commit the cache
// can name a file after: printable ASCII without spaces or '\', no empty,
// "." or ".." part between slashes, 256 characters at most.
absl::Status CheckRevision(absl::string_view revision);
// INVALID_ARGUMENT unless `path` (a file's path in a repository, from the
// hub's listing) stays inside the snapshot folder: relative, no empty, "."
// or ".." part, no '\' or control character.
absl::Status CheckRepoPath(absl::string_view path);

// A full commit hash (40 lowercase hexadecimal digits).
bool IsCommitHash(absl::string_view revision);
// An ETag header's value as the blob's file name: W/ and the quotes
// removed, as huggingface_hub does.
std::string NormalizeEtag(absl::string_view etag);

// One model repository's folder in a cache.
class RepoCache {
 public:
  // `repo_id` must pass CheckRepoId.
  RepoCache(std::string cache_dir, std::string repo_id);

  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& repo_id() const { return repo_id_; }
  // <cache>/models--ORG--NAME
  const std::string& storage() const { return storage_; }
  std::string BlobPath(absl::string_view etag) const;
  std::string SnapshotDir(absl::string_view commit) const;
  std::string LockPath(absl::string_view etag) const;

  // The commit `revision` names here: itself when it is a commit hash,
  // else what refs/<revision> holds. NOT_FOUND when the cache has no such
  // ref.
  absl::StatusOr<std::string> CachedCommit(absl::string_view revision) const;
  // Records that `revision` names `commit` (refs/<revision>, written to a
  // temporary file and renamed); nothing when `revision` is that commit.
  absl::Status WriteRef(absl::string_view revision, absl::string_view commit) const;
  // snapshots/<commit>/<path> as a relative symlink to blobs/<etag>,
  // replacing what was there; the folders are created as needed.
  absl::Status LinkSnapshotFile(absl::string_view commit, absl::string_view path,
                                absl::string_view etag) const;
  // Creates the cache folder, its CACHEDIR.TAG (backup tools skip the
  // folder) and this repository's blobs/ and lock folder.
  absl::Status Prepare() const;

 private:
  std::string cache_dir_;
  std::string repo_id_;
  std::string storage_;
};

// An exclusive flock(2) on a file, held until destroyed: the lock
// huggingface_hub's filelock takes on the same path, so this server and
// huggingface_hub never write one blob at once. Acquire waits as long as
// it takes, calling `waiting` every 10 s (to log who waits for what).
class FileLock {
 public:
  static absl::StatusOr<FileLock> Acquire(const std::string& path,
                                          void (*waiting)(const std::string& path, int seconds));
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace infer::hub

#endif  // INFER_SERVER_HUB_HUB_CACHE_H_
