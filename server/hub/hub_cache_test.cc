#include "server/hub/hub_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/hub/hub_blob.h"
#include "server/hub/hub_http.h"

namespace infer::hub {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  std::string pattern = (fs::temp_directory_path() / "hub_cache_test.XXXXXX").string();
  return mkdtemp(pattern.data());
}

TEST(HubCacheTest, RepoIdsAsTheHubAllowsThem) {
  for (const char* ok :
       {"BAAI/bge-m3", "bert-base-uncased", "sentence-transformers/all-MiniLM-L6-v2",
        "intfloat/multilingual-e5-small", "a/b_c.d"}) {
    EXPECT_TRUE(CheckRepoId(ok).ok()) << ok;
  }
  for (const char* bad : {"", "a/b/c", "../etc", "a/..", "org--x/y", "-a/b", "a/b.", "a b/c",
                          "/abs", "a/", "a/b\n"}) {
    EXPECT_EQ(CheckRepoId(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckRepoId(std::string(97, 'a')).ok());
}

TEST(HubCacheTest, RevisionsAndPathsStayInsideTheCache) {
  for (const char* ok : {"main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"}) {
    EXPECT_TRUE(CheckRevision(ok).ok()) << ok;
  }
  for (const char* bad : {"", "..", "a/../b", "/main", "a//b", "with space", "back\\slash"}) {
    EXPECT_FALSE(CheckRevision(bad).ok()) << bad;
  }
  for (const char* ok : {"config.json", "1_Pooling/config.json", "a/b/c.safetensors"}) {
    EXPECT_TRUE(CheckRepoPath(ok).ok()) << ok;
  }
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "./x", "a\\b", "a\tb"}) {
    EXPECT_FALSE(CheckRepoPath(bad).ok()) << bad;
  }
}

TEST(HubCacheTest, ARevisionIsOnePathSegmentInAUrl) {
  EXPECT_EQ(UrlEncode("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(UrlEncode("v1.0_a-b~c d"), "v1.0_a-b~c%20d");
}

TEST(HubCacheTest, CommitHashesAndEtags) {
  EXPECT_TRUE(IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("main"));
  EXPECT_EQ(NormalizeEtag("\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("W/\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("abc"), "abc");
}

TEST(HubCacheTest, LayoutIsHuggingfaceHubs) {
  const std::string dir = TempDir();
  RepoCache cache(dir, "BAAI/bge-m3");
  EXPECT_EQ(cache.storage(), dir + "/models--BAAI--bge-m3");
  EXPECT_EQ(cache.BlobPath("e1"), dir + "/models--BAAI--bge-m3/blobs/e1");
  EXPECT_EQ(cache.LockPath("e1"), dir + "/.locks/models--BAAI--bge-m3/e1.lock");
  EXPECT_EQ(RepoCache(dir, "bert-base-uncased").storage(), dir + "/models--bert-base-uncased");
  ASSERT_TRUE(cache.Prepare().ok());
  EXPECT_TRUE(fs::exists(dir + "/CACHEDIR.TAG"));

  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_EQ(cache.CachedCommit("main").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*cache.CachedCommit(commit), commit);
  ASSERT_TRUE(cache.WriteRef("main", commit).ok());
  ASSERT_TRUE(cache.WriteRef("refs/pr/1", commit).ok());
  EXPECT_EQ(*cache.CachedCommit("main"), commit);
  EXPECT_EQ(*cache.CachedCommit("refs/pr/1"), commit);
  {
    std::ifstream in(cache.storage() + "/refs/main");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, commit);  // no newline, as huggingface_hub writes it
  }

  std::ofstream(cache.BlobPath("e1")) << "{}";
  ASSERT_TRUE(cache.LinkSnapshotFile(commit, "config.json", "e1").ok());
  ASSERT_TRUE(cache.LinkSnapshotFile(commit, "1_Pooling/config.json", "e1").ok());
  const std::string snap = cache.SnapshotDir(commit);
  EXPECT_EQ(fs::read_symlink(snap + "/config.json").string(), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(snap + "/1_Pooling/config.json").string(), "../../../blobs/e1");
  EXPECT_TRUE(fs::is_regular_file(snap + "/1_Pooling/config.json"));
  // Linking again replaces the entry.
  ASSERT_TRUE(cache.LinkSnapshotFile(commit, "config.json", "e1").ok());
  EXPECT_TRUE(fs::is_regular_file(snap + "/config.json"));
  fs::remove_all(dir);
}

TEST(HubCacheTest, TheLockKeepsAnotherProcessOut) {
  const std::string dir = TempDir();
  const std::string path = dir + "/x.lock";
  absl::StatusOr<FileLock> held = FileLock::Acquire(path, nullptr);
  ASSERT_TRUE(held.ok());
  // A child process cannot take it while this one holds it (flock is per
  // open file description, so a second open in this process would not do).
  const pid_t child = fork();
  if (child == 0) {
    const int fd = open(path.c_str(), O_RDWR);
    _exit(flock(fd, LOCK_EX | LOCK_NB) == 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child got the lock";
  { FileLock released = *std::move(held); }
  EXPECT_TRUE(FileLock::Acquire(path, nullptr).ok());
  fs::remove_all(dir);
}

TEST(HubCacheTest, DigestsAreSha256AndGitBlobIds) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/f", std::ios::binary) << "hello\n";
  // `printf 'hello\n' | sha256sum` and `git hash-object`.
  EXPECT_EQ(*FileDigest(dir + "/f", 64),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_EQ(*FileDigest(dir + "/f", 40), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(FileDigest(dir + "/f", 32).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FileDigest(dir + "/none", 64).status().code(), absl::StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infer::hub
