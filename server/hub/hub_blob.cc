#include "server/hub/hub_blob.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/hub/hub_http.h"

namespace infer::hub {
namespace {

constexpr int kTries = 5;

std::string Errno() { return std::strerror(errno); }

int64_t FileSize(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

void LogLockWait(const std::string& path, int seconds) {
  spdlog::info("waiting {} s for {} (another process is downloading this file)", seconds, path);
}

// The first bytes of an error answer's body, for a message.
std::string Excerpt(const std::string& body) {
  std::string out = body.substr(0, 200);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

// Downloads into the open .incomplete file until it has `source.size`
// bytes (or more: the check after catches that).
absl::Status Transfer(int fd, const BlobSource& source, TransferProgress* progress) {
  int64_t offset = FileSize(fd);
  if (offset > source.size) {
    if (ftruncate(fd, 0) != 0) return absl::PermissionDeniedError(Errno());
    offset = 0;
  }
  progress->StartFile(source.path, offset);
  std::string last_error;
  for (int attempt = 1; attempt <= kTries && offset < source.size; ++attempt) {
    int64_t reported = 0;
    const DownloadAnswer d =
        Download(source.url, source.token, fd, offset, source.size, [&](int64_t written) {
          progress->Add(written - reported);
          reported = written;
          return true;
        });
    const int64_t now = FileSize(fd);
    if (now >= source.size) {  // whole (or cut off at its size): the hash decides
      if (!d.error.empty()) spdlog::warn("download of {}: {}", source.path, d.error);
      offset = now;
      break;
    }
    if (d.status == 200 || d.status == 206) {
      if (d.error.empty()) {
        offset = now;
        break;
      }
    } else if (d.status == 416) {
      // The range is past the end: what is there is not the start of this
      // file. Start over.
      if (ftruncate(fd, 0) != 0) return absl::PermissionDeniedError(Errno());
      last_error = "416 (the range asked for is past the end)";
      offset = 0;
      continue;
    } else if (d.status != 0 && d.status != 429 && d.status < 500) {
      return absl::PermissionDeniedError(absl::StrCat("the server answered ", d.status, " for ",
                                                      source.path, ": ", Excerpt(d.body)));
    }
    last_error = d.error.empty() ? absl::StrCat("the server answered ", d.status) : d.error;
    offset = now < 0 ? 0 : now;
    if (attempt < kTries) {
      const absl::Duration wait = absl::Seconds(1 << (attempt - 1));
      progress->BreakLine();
      spdlog::warn(
          "download of {} interrupted ({}) at {} of {} bytes; resuming in {} (try {} of {})",
          source.path, last_error, offset, source.size, absl::FormatDuration(wait), attempt + 1,
          kTries);
      absl::SleepFor(wait);
    }
  }
  progress->EndFile();
  if (offset < source.size) {
    return absl::UnavailableError(absl::StrCat("the download of ", source.path, " failed ", kTries,
                                               " times (last: ", last_error, "); ", offset, " of ",
                                               source.size, " bytes are kept to resume from"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FileDigest(const std::string& path, size_t digest_length) {
  const EVP_MD* md = digest_length == 64   ? EVP_sha256()
                     : digest_length == 40 ? EVP_sha1()
                                           : nullptr;
  if (md == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no digest has ", digest_length, " digits"));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", Errno()));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), md, nullptr);
  if (digest_length == 40) {
    // git's blob id: SHA-1 of "blob <size>\0" and the bytes.
    const std::string header = absl::StrCat("blob ", FileSize(fd));
    EVP_DigestUpdate(ctx.get(), header.data(), header.size() + 1);
  }
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = Errno();
      close(fd);
      return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", err));
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(n));
  }
  close(fd);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), len));
}

absl::Status FetchBlob(const RepoCache& cache, const BlobSource& source,
                       TransferProgress* progress) {
  namespace fs = std::filesystem;
  const std::string blob = cache.BlobPath(source.etag);
  std::error_code ec;
  if (fs::exists(blob, ec)) return absl::OkStatus();
  absl::StatusOr<FileLock> lock = FileLock::Acquire(cache.LockPath(source.etag), &LogLockWait);
  if (!lock.ok()) return lock.status();
  // Whoever held the lock may have written it meanwhile.
  if (fs::exists(blob, ec)) return absl::OkStatus();
  const std::string incomplete = blob + ".incomplete";
  const int fd = open(incomplete.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", incomplete, ": ", Errno()));
  }
  absl::Status status = Transfer(fd, source, progress);
  if (status.ok() && fdatasync(fd) != 0) {
    status = absl::PermissionDeniedError(absl::StrCat("cannot write ", incomplete, ": ", Errno()));
  }
  const int64_t size = FileSize(fd);
  close(fd);
  if (!status.ok()) return status;
  // Checked as it lies on disk: whatever came over the network, in however
  // many pieces, the blob is what the hub listed or it is not kept.
  std::string problem;
  if (size != source.size) {
    problem = absl::StrCat(size, " bytes instead of the ", source.size, " the hub lists");
  } else if (!source.digest.empty()) {
    absl::StatusOr<std::string> digest = FileDigest(incomplete, source.digest.size());
    if (!digest.ok()) return digest.status();
    if (*digest != source.digest) {
      problem = absl::StrCat(source.digest.size() == 64 ? "SHA-256 " : "git blob SHA-1 ", *digest,
                             " instead of the hub's ", source.digest);
    }
  }
  if (!problem.empty()) {
    std::remove(incomplete.c_str());
    return absl::DataLossError(absl::StrCat("the downloaded ", source.path, " has ", problem,
                                            "; it was deleted, not kept"));
  }
  if (std::rename(incomplete.c_str(), blob.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", blob, ": ", Errno()));
  }
  return absl::OkStatus();
}

}  // namespace infer::hub
