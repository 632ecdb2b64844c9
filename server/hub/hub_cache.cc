#include "server/hub/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/quote.h"

namespace infer::hub {
namespace {

namespace fs = std::filesystem;

std::string Home() {
  std::string home = Env("HOME");
  return home.empty() ? std::string("/root") : home;
}

absl::Status Invalid(absl::string_view what, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", Quote(value), " ", why));
}

// A part of a repository id: [A-Za-z0-9._-]+, not starting or ending in
// '-' or '.'.
bool RepoIdPart(absl::string_view part) {
  if (part.empty()) return false;
  for (char c : part) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  auto edge = [](char c) { return c == '-' || c == '.'; };
  return !edge(part.front()) && !edge(part.back());
}

// A unique suffix for a temporary file beside its target.
std::string TempSuffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(".", getpid(), ".", rng() % 1000000000, ".tmp");
}

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// Renames `tmp` over `target` (atomic: a reader sees the old entry or the
// new one); on failure removes `tmp` and says "cannot <what>".
absl::Status RenameOver(const std::string& tmp, const std::string& target, absl::string_view what) {
  if (std::rename(tmp.c_str(), target.c_str()) == 0) return absl::OkStatus();
  const int err = errno;
  std::remove(tmp.c_str());
  return absl::PermissionDeniedError(absl::StrCat("cannot ", what, ": ", ErrnoText(err)));
}

}  // namespace

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string HfHomeFromEnvironment() {
  std::string home = Env("HF_HOME");
  if (!home.empty()) return home;
  std::string xdg = Env("XDG_CACHE_HOME");
  if (xdg.empty()) xdg = Home() + "/.cache";
  return xdg + "/huggingface";
}

std::string CacheDirFromEnvironment() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    std::string dir = Env(name);
    if (!dir.empty()) return dir;
  }
  return HfHomeFromEnvironment() + "/hub";
}

absl::Status CheckRepoId(absl::string_view repo_id) {
  constexpr char kWhy[] =
      "is not a model id on the hub (NAME or ORG/NAME: letters, digits, '-', '_', '.'; not "
      "starting or ending in '-' or '.'; no '--' or '..'; at most 96 characters)";
  if (repo_id.empty() || repo_id.size() > 96 || absl::StrContains(repo_id, "--") ||
      absl::StrContains(repo_id, "..")) {
    return Invalid("model id", repo_id, kWhy);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(repo_id, '/');
  if (parts.size() > 2) return Invalid("model id", repo_id, kWhy);
  for (absl::string_view part : parts) {
    if (!RepoIdPart(part)) return Invalid("model id", repo_id, kWhy);
  }
  return absl::OkStatus();
}

absl::Status CheckRevision(absl::string_view revision) {
  if (revision.empty() || revision.size() > 256) {
    return Invalid("revision", revision, "must have 1 to 256 characters");
  }
  for (char c : revision) {
    if (c <= ' ' || c > '~' || c == '\\') {
      return Invalid("revision", revision, "has a character a branch or tag name cannot have");
    }
  }
  for (absl::string_view part : absl::StrSplit(revision, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Invalid("revision", revision, "has an empty, '.' or '..' part");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRepoPath(absl::string_view path) {
  if (path.empty() || path.size() > 1024) {
    return Invalid("file path", path, "must have 1 to 1024 characters");
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') {
      return Invalid("file path", path, "has a control character or '\\'");
    }
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return Invalid("file path", path, "is not a relative path inside the repository");
    }
  }
  return absl::OkStatus();
}

bool IsCommitHash(absl::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

std::string NormalizeEtag(absl::string_view etag) {
  etag = absl::StripAsciiWhitespace(etag);
  absl::ConsumePrefix(&etag, "W/");
  while (absl::ConsumePrefix(&etag, "\"")) {
  }
  while (absl::ConsumeSuffix(&etag, "\"")) {
  }
  return std::string(etag);
}

RepoCache::RepoCache(std::string cache_dir, std::string repo_id)
    : cache_dir_(std::move(cache_dir)), repo_id_(std::move(repo_id)) {
  std::string folder = "models";
  for (absl::string_view part : absl::StrSplit(repo_id_, '/')) absl::StrAppend(&folder, "--", part);
  storage_ = absl::StrCat(cache_dir_, "/", folder);
}

std::string RepoCache::BlobPath(absl::string_view etag) const {
  return absl::StrCat(storage_, "/blobs/", etag);
}

std::string RepoCache::SnapshotDir(absl::string_view commit) const {
  return absl::StrCat(storage_, "/snapshots/", commit);
}

std::string RepoCache::LockPath(absl::string_view etag) const {
  return absl::StrCat(cache_dir_, "/.locks/", fs::path(storage_).filename().string(), "/", etag,
                      ".lock");
}

absl::StatusOr<std::string> RepoCache::CachedCommit(absl::string_view revision) const {
  if (IsCommitHash(revision)) return std::string(revision);
  const std::string ref = absl::StrCat(storage_, "/refs/", revision);
  std::ifstream in(ref);
  std::string commit;
  if (!in || !std::getline(in, commit)) {
    return absl::NotFoundError(absl::StrCat("the cache has no ref ", ref));
  }
  commit = std::string(absl::StripAsciiWhitespace(commit));
  if (!IsCommitHash(commit)) {
    return absl::NotFoundError(absl::StrCat(ref, " holds no commit hash"));
  }
  return commit;
}

absl::Status RepoCache::WriteRef(absl::string_view revision, absl::string_view commit) const {
  if (revision == commit) return absl::OkStatus();
  const fs::path ref = absl::StrCat(storage_, "/refs/", revision);
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (absl::StatusOr<std::string> had = CachedCommit(revision); had.ok() && *had == commit) {
    return absl::OkStatus();  // a read-only cache that is up to date stays untouched
  }
  const std::string tmp = ref.string() + TempSuffix();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;  // no newline, as huggingface_hub writes it
    if (!out.flush()) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    }
  }
  return RenameOver(tmp, ref.string(), absl::StrCat("write ", ref.string()));
}

absl::Status RepoCache::LinkSnapshotFile(absl::string_view commit, absl::string_view path,
                                         absl::string_view etag) const {
  const fs::path link = absl::StrCat(SnapshotDir(commit), "/", path);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", link.parent_path().string(), ": ", ec.message()));
  }
  // snapshots/<commit>/a/b -> ../../../blobs/<etag>: one ".." for the
  // commit's folder, one for snapshots/, one per folder in `path`.
  std::string target = "../../";
  for (char c : path) {
    if (c == '/') target += "../";
  }
  absl::StrAppend(&target, "blobs/", etag);
  // Beside it under a temporary name, then renamed over whatever was there:
  // a concurrent reader sees the old entry or the new one, never none.
  const std::string tmp = link.string() + TempSuffix();
  fs::create_symlink(target, tmp, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the link ", link.string(), ": ", ec.message()));
  }
  return RenameOver(tmp, link.string(), absl::StrCat("create the link ", link.string()));
}

absl::Status RepoCache::Prepare() const {
  std::error_code ec;
  for (const std::string& dir :
       {storage_ + "/blobs", fs::path(LockPath("x")).parent_path().string()}) {
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create the cache folder ", dir, ": ", ec.message()));
    }
  }
  const std::string tag = cache_dir_ + "/CACHEDIR.TAG";
  if (!fs::exists(tag, ec)) {
    // The Cache Directory Tagging Specification's signature line.
    std::ofstream out(tag);
    out << "Signature: 8a477f597d28d172789f06886806bc55\n"
           "# This file is a cache directory tag created by huggingface_hub.\n"
           "# For information about cache directory tags, see:\n"
           "#\thttps://bford.info/cachedir/\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path,
                                           void (*waiting)(const std::string&, int)) {
  // 0664 as huggingface_hub creates its lock files: users who share a cache
  // through a group can wait for each other's locks.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open the lock file ", path, ": ", ErrnoText(errno)));
  }
  int waited_ms = 0;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("cannot lock ", path, ": ", ErrnoText(err)));
    }
    usleep(100 * 1000);
    waited_ms += 100;
    if (waiting != nullptr && waited_ms % 10000 == 0) waiting(path, waited_ms / 1000);
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace infer::hub
