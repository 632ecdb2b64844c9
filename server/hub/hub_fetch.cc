#include "server/hub/hub_fetch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"
#include "server/hub/hub_blob.h"
#include "server/hub/hub_cache.h"
#include "server/hub/hub_files.h"
#include "server/hub/hub_http.h"
#include "server/hub/transfer_progress.h"

namespace infer::hub {
namespace {

namespace fs = std::filesystem;

bool EnvTrue(const char* name) {
  const std::string v = absl::AsciiStrToUpper(Env(name));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

absl::StatusOr<std::string> FirstLine(const std::string& path, bool required) {
  std::ifstream in(path);
  if (!in) {
    if (!required) return std::string();
    return absl::NotFoundError(absl::StrCat("cannot read the token file ", path));
  }
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

// What the hub says about a refusal: its X-Error-Message header, else the
// "error" of a JSON body, cut short.
std::string HubMessage(const HttpAnswer& a) {
  std::string m = a.Header("x-error-message");
  if (m.empty()) {
    absl::StatusOr<nlohmann::json> doc = ParseJson(a.body.substr(0, 4096), "an error");
    if (doc.ok() && doc->is_object()) {
      auto e = doc->find("error");
      if (e != doc->end() && e->is_string()) m = e->get<std::string>();
    }
  }
  m = m.substr(0, 200);
  for (char& c : m) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return m;
}

struct Context {
  const std::string& repo;
  const std::string& revision;
  const HubOptions& options;
};

// A 4xx from the hub as a one-line reason.
absl::Status Refusal(const HttpAnswer& a, const Context& c) {
  const std::string code = a.Header("x-error-code");
  const std::string message = HubMessage(a);
  const std::string said = message.empty() ? "" : absl::StrCat(": ", message);
  if (code == "RevisionNotFound") {
    return absl::NotFoundError(absl::StrCat("the hub has no revision '", c.revision, "' of ",
                                            c.repo, " (", a.status, ")"));
  }
  if (code == "GatedRepo") {
    return absl::PermissionDeniedError(absl::StrCat(
        c.repo, " is gated: its conditions must be accepted on the hub by the account of the ",
        "token (", a.status, said, ")"));
  }
  if (a.status == 401 && message == "Invalid credentials in Authorization header") {
    return absl::UnauthenticatedError(absl::StrCat(
        "the hub refused the token (401: invalid credentials); check HF_TOKEN or --hf-token-file"));
  }
  if (code == "RepoNotFound" || a.status == 401 || a.status == 404) {
    return absl::NotFoundError(absl::StrCat(
        "the hub at ", c.options.endpoint, " has no repository ", c.repo,
        c.options.token.empty() ? ", or it is private or gated and needs a token (HF_TOKEN or "
                                  "--hf-token-file)"
                                : " that this token may read",
        " (", a.status, said, ")"));
  }
  if (a.status == 403) {
    return absl::PermissionDeniedError(
        absl::StrCat("the hub forbids access to ", c.repo, " (403", said, ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat("the hub answered ", a.status, said));
}

// Whether the answer means the hub is out of reach rather than refusing.
bool Unreachable(const HttpAnswer& a) {
  return a.status == 0 || a.status == 429 || a.status >= 500;
}

std::string UnreachableReason(const HttpAnswer& a, const Context& c) {
  return a.status == 0
             ? absl::StrCat("cannot reach the hub at ", c.options.endpoint, " (", a.error, ")")
             : absl::StrCat("the hub at ", c.options.endpoint, " answered ", a.status);
}

// The files under a snapshot folder (links followed), as a listing.
std::vector<RepoFile> SnapshotListing(const std::string& dir) {
  std::vector<RepoFile> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;  // follows the link: a dangling one is no file
    RepoFile f;
    f.path = it->path().lexically_relative(dir).string();  // the link's path, not its blob's
    f.size = static_cast<int64_t>(it->file_size(ec));
    files.push_back(std::move(f));
  }
  return files;
}

// The cached copy of the revision, when it is complete; `why` says why
// the hub was not asked (or could not be), for the log and the error.
absl::StatusOr<HubModel> FromCache(const RepoCache& cache, const Context& c, const std::string& why,
                                   absl::StatusCode missing_code) {
  absl::StatusOr<std::string> commit = cache.CachedCommit(c.revision);
  const std::string dir = commit.ok() ? cache.SnapshotDir(*commit) : std::string();
  std::error_code ec;
  if (!commit.ok() || !fs::is_directory(dir, ec)) {
    return absl::Status(missing_code,
                        absl::StrCat(why, ", and the cache at ", cache.cache_dir(),
                                     " holds no copy of revision '", c.revision, "'"));
  }
  const std::vector<RepoFile> listing = SnapshotListing(dir);
  absl::StatusOr<std::vector<const RepoFile*>> meta = MetadataFiles(listing);
  absl::Status complete = meta.status();
  if (complete.ok()) complete = ContentFiles(listing, dir, c.options.extra_folders).status();
  if (!complete.ok()) {
    return absl::Status(missing_code, absl::StrCat(why, ", and its cached copy at ", dir,
                                                   " is incomplete: it ", complete.message()));
  }
  spdlog::warn("{}: {}; serving commit {} from the cache at {}", c.repo, why, *commit, dir);
  return HubModel{dir, *commit};
}

// `rel="next"` of a Link header (the hub pages long listings), or empty.
std::string NextPage(const std::string& link) {
  for (absl::string_view part : absl::StrSplit(link, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!absl::StrContains(part, "rel=\"next\"")) continue;
    const size_t open = part.find('<');
    const size_t close = part.find('>');
    if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) break;
    std::string url(part.substr(open + 1, close - open - 1));
    if (absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://")) return url;
    break;
  }
  return "";
}

absl::StatusOr<std::vector<RepoFile>> ListTree(const std::string& commit, const Context& c) {
  std::string url = absl::StrCat(c.options.endpoint, "/api/models/", c.repo, "/tree/", commit,
                                 "?recursive=true&expand=false");
  std::vector<RepoFile> tree;
  // Bounded whatever the endpoint sends: 1000 pages, 256 MiB of listing.
  int64_t listed_bytes = 0;
  for (int page = 0; !url.empty(); ++page) {
    if (page == 1000 || listed_bytes > (int64_t{256} << 20)) {
      return absl::FailedPreconditionError("the hub's tree listing has over 1000 pages or 256 MiB");
    }
    const HttpAnswer a = Fetch({.url = url, .token = c.options.token});
    listed_bytes += static_cast<int64_t>(a.body.size());
    if (Unreachable(a)) {
      return absl::UnavailableError(absl::StrCat(UnreachableReason(a, c), " (listing its files)"));
    }
    if (a.status != 200) return Refusal(a, c);
    INFER_ASSIGN_OR_RETURN(std::vector<RepoFile> files, ParseTreeListing(a.body));
    for (RepoFile& f : files) tree.push_back(std::move(f));
    url = NextPage(a.Header("link"));
  }
  return tree;
}

// Where a file's bytes are, and what they must hash to: the hub's HEAD on
// its resolve URL (relative redirects, which the hub gives for a renamed
// repository, followed; an absolute one is the storage URL).
absl::StatusOr<BlobSource> Locate(const RepoFile& f, const std::string& commit, const Context& c) {
  std::string path_in_url;
  for (absl::string_view part : absl::StrSplit(f.path, '/')) {
    absl::StrAppend(&path_in_url, path_in_url.empty() ? "" : "/", UrlEncode(part));
  }
  std::string url =
      absl::StrCat(c.options.endpoint, "/", c.repo, "/resolve/", commit, "/", path_in_url);
  BlobSource source;
  source.path = f.path;
  source.token = c.options.token;
  HttpAnswer a;
  for (int hop = 0;; ++hop) {
    a = Fetch({.method = "HEAD", .url = url, .token = c.options.token, .follow_redirects = false});
    const std::string location = a.Header("location");
    if (a.status >= 300 && a.status < 400 && absl::StartsWith(location, "/") && hop < 5) {
      url = c.options.endpoint + location;
      continue;
    }
    break;
  }
  if (Unreachable(a)) {
    return absl::UnavailableError(
        absl::StrCat(UnreachableReason(a, c), " (asking for ", f.path, ")"));
  }
  if (a.status >= 300 && a.status < 400 && !a.Header("location").empty()) {
    // The storage URL is signed: the token stays with the hub.
    source.url = a.Header("location");
    source.token.clear();
  } else if (a.status == 200) {
    source.url = url;
  } else {
    absl::Status refused = Refusal(a, c);
    return absl::Status(refused.code(), absl::StrCat(f.path, ": ", refused.message()));
  }
  const std::string repo_commit = a.Header("x-repo-commit");
  if (!repo_commit.empty() && repo_commit != commit) {
    return absl::FailedPreconditionError(absl::StrCat("the hub answered commit ", repo_commit,
                                                      " for ", f.path, " of commit ", commit));
  }
  std::string etag = a.Header("x-linked-etag");
  if (etag.empty()) etag = a.Header("etag");
  source.etag = NormalizeEtag(etag);
  if (source.etag.empty() || source.etag.size() > 128 ||
      !std::all_of(source.etag.begin(), source.etag.end(),
                   [](char ch) { return absl::ascii_isalnum(ch) || ch == '-' || ch == '_'; })) {
    return absl::FailedPreconditionError(
        absl::StrCat("the hub gave ", f.path, " no ETag a cache file can be named after"));
  }
  int64_t size = f.size;
  const std::string linked_size = a.Header("x-linked-size");
  if (!linked_size.empty() && (!absl::SimpleAtoi(linked_size, &size) || size != f.size)) {
    return absl::FailedPreconditionError(absl::StrCat("the hub lists ", f.path, " at ", f.size,
                                                      " bytes but its X-Linked-Size says ",
                                                      linked_size));
  }
  source.size = f.size;
  // An LFS file's ETag is its SHA-256, which the listing gives too; another
  // file's is git's blob id.
  if (!f.lfs_sha256.empty()) {
    source.digest = absl::AsciiStrToLower(f.lfs_sha256);
    if (source.etag.size() == 64 && absl::AsciiStrToLower(source.etag) != source.digest) {
      return absl::FailedPreconditionError(
          absl::StrCat("the hub's ETag of ", f.path, " is not the SHA-256 its listing gives"));
    }
  } else if (source.etag.size() == 40 || source.etag.size() == 64) {
    source.digest = absl::AsciiStrToLower(source.etag);
  } else {
    spdlog::warn("{}: {} has no SHA-256 or git blob id to check; only its size is checked", c.repo,
                 f.path);
  }
  return source;
}

// The listed files not yet in the snapshot, downloaded and linked into it.
absl::Status FetchFiles(const std::vector<const RepoFile*>& files, const std::string& commit,
                        const RepoCache& cache, const Context& c, const char* what, int* fetched) {
  std::vector<const RepoFile*> missing;
  int64_t total = 0;
  std::error_code ec;
  for (const RepoFile* f : files) {
    if (fs::exists(absl::StrCat(cache.SnapshotDir(commit), "/", f->path), ec)) continue;
    missing.push_back(f);
    total += f->size;
  }
  if (missing.empty()) return absl::OkStatus();
  TransferProgress progress(absl::StrCat(c.repo, " (", what, ")"), total);
  for (const RepoFile* f : missing) {
    INFER_ASSIGN_OR_RETURN(BlobSource source, Locate(*f, commit, c));
    INFER_RETURN_IF_ERROR(FetchBlob(cache, source, &progress));
    INFER_RETURN_IF_ERROR(cache.LinkSnapshotFile(commit, f->path, source.etag));
    ++*fetched;
  }
  progress.Finish(static_cast<int>(missing.size()));
  return absl::OkStatus();
}

absl::StatusOr<HubModel> Resolve(const RepoCache& cache, const Context& c) {
  if (c.options.offline) {
    return FromCache(cache, c, "HF_HUB_OFFLINE is set (no request to the hub)",
                     absl::StatusCode::kUnavailable);
  }
  InitHubHttp();
  const HttpAnswer a = Fetch({.url = absl::StrCat(c.options.endpoint, "/api/models/", c.repo,
                                                  "/revision/", UrlEncode(c.revision)),
                              .token = c.options.token});
  if (Unreachable(a)) {
    return FromCache(cache, c, UnreachableReason(a, c), absl::StatusCode::kUnavailable);
  }
  if (a.status != 200) {
    const absl::Status refused = Refusal(a, c);
    // As huggingface_hub: a copy the cache holds is served, with the
    // hub's refusal in the log; an unknown revision never is.
    if (a.Header("x-error-code") == "RevisionNotFound") return refused;
    absl::StatusOr<HubModel> cached =
        FromCache(cache, c, std::string(refused.message()), refused.code());
    return cached.ok() ? cached : refused;
  }
  INFER_ASSIGN_OR_RETURN(nlohmann::json info, ParseJson(a.body, "the hub's model info"));
  auto sha = info.is_object() ? info.find("sha") : info.end();
  if (!info.is_object() || sha == info.end() || !sha->is_string() ||
      !IsCommitHash(sha->get_ref<const std::string&>())) {
    return absl::FailedPreconditionError("the hub's model info has no commit hash ('sha')");
  }
  const std::string commit = *sha;
  INFER_ASSIGN_OR_RETURN(std::vector<RepoFile> tree, ListTree(commit, c));
  INFER_RETURN_IF_ERROR(cache.Prepare());
  INFER_ASSIGN_OR_RETURN(std::vector<const RepoFile*> metadata, MetadataFiles(tree));
  int fetched = 0;
  INFER_RETURN_IF_ERROR(FetchFiles(metadata, commit, cache, c, "settings", &fetched));
  INFER_ASSIGN_OR_RETURN(std::vector<const RepoFile*> content,
                         ContentFiles(tree, cache.SnapshotDir(commit), c.options.extra_folders));
  INFER_RETURN_IF_ERROR(FetchFiles(content, commit, cache, c, "weights", &fetched));
  // After the files: a ref never names a commit whose snapshot is partial.
  INFER_RETURN_IF_ERROR(cache.WriteRef(c.revision, commit));
  const std::string dir = cache.SnapshotDir(commit);
  spdlog::info(
      "{} at revision '{}': commit {}, {}; {}", c.repo, c.revision, commit,
      fetched == 0 ? "every file already in the cache" : absl::StrCat(fetched, " files downloaded"),
      dir);
  return HubModel{dir, commit};
}

}  // namespace

absl::StatusOr<HubOptions> HubOptionsFromEnvironment(const std::string& token,
                                                     const std::string& token_file) {
  HubOptions o;
  const std::string env_endpoint = Env("HF_ENDPOINT");
  absl::string_view endpoint = env_endpoint;
  while (absl::ConsumeSuffix(&endpoint, "/")) {
  }
  if (!endpoint.empty()) o.endpoint = std::string(endpoint);
  o.cache_dir = CacheDirFromEnvironment();
  o.offline = EnvTrue("HF_HUB_OFFLINE") || EnvTrue("TRANSFORMERS_OFFLINE");
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError(
        "give the hub's token once: --hf-token (or HF_TOKEN) or "
        "--hf-token-file, not both");
  }
  o.token = token;
  if (o.token.empty() && !token_file.empty()) {
    INFER_ASSIGN_OR_RETURN(o.token, FirstLine(token_file, true));
  }
  if (o.token.empty()) o.token = Env("HUGGING_FACE_HUB_TOKEN");
  if (o.token.empty()) {
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) path = HfHomeFromEnvironment() + "/token";
    INFER_ASSIGN_OR_RETURN(o.token, FirstLine(path, false));
  }
  for (char ch : o.token) {
    if (ch <= ' ' || ch > '~') {
      return absl::InvalidArgumentError(
          "the hub's token has a character an HTTP header cannot carry");
    }
  }
  return o;
}

absl::StatusOr<HubModel> FetchHubModel(const std::string& repo_id, const std::string& revision,
                                       const HubOptions& options) {
  absl::Status valid = CheckRepoId(repo_id);
  if (valid.ok()) valid = CheckRevision(revision);
  absl::StatusOr<HubModel> model = valid.ok() ? Resolve(RepoCache(options.cache_dir, repo_id),
                                                        Context{repo_id, revision, options})
                                              : absl::StatusOr<HubModel>(valid);
  if (model.ok()) return model;
  return absl::Status(model.status().code(), absl::StrCat("--model-id ", repo_id, "@", revision,
                                                          ": ", model.status().message()));
}

}  // namespace infer::hub
