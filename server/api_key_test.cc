#include "server/api_key.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using testing::IsOk;
using testing::StatusIs;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeyTest, NoKeyLetsEverythingPass) {
  auto key = ApiKey::FromFlags("", "");
  ASSERT_THAT(key, IsOk());
  EXPECT_FALSE(key->enabled());
  EXPECT_TRUE(key->Allows(""));
  EXPECT_TRUE(key->Allows("Bearer anything"));
}

TEST(ApiKeyTest, OnlyBearerWithTheExactKeyPasses) {
  const ApiKey key("s3cret-Key");
  EXPECT_TRUE(key.enabled());
  EXPECT_TRUE(key.Allows("Bearer s3cret-Key"));
  EXPECT_TRUE(key.Allows("bearer s3cret-Key"));  // the scheme's case is free (RFC 7235)
  EXPECT_TRUE(key.Allows("BEARER s3cret-Key"));
  for (const char* wrong :
       {"", "Bearer", "Bearer ", "s3cret-Key", "Bearer s3cret-key", "Bearer s3cret-Ke",
        "Bearer s3cret-Keyy", "Basic s3cret-Key", "Bearer  s3cret-Key", "Bearer s3cret-Key "}) {
    EXPECT_FALSE(key.Allows(wrong)) << wrong;
  }
}

TEST(ApiKeyTest, RefusalsAreCountedPerFrontend) {
  const ApiKey key("k");
  key.CountRefusal(ApiKey::kHttp);
  key.CountRefusal(ApiKey::kHttp);
  key.CountRefusal(ApiKey::kGrpc);
  EXPECT_EQ(key.refusals(ApiKey::kHttp), 2);
  EXPECT_EQ(key.refusals(ApiKey::kGrpc), 1);
}

TEST(ApiKeyTest, FromAFileItsFirstLine) {
  auto key = ApiKey::FromFlags("", WriteFile("key_ok", "from-file \r\nsecond line\n"));
  ASSERT_THAT(key, IsOk());
  EXPECT_TRUE(key->Allows("Bearer from-file"));
  EXPECT_FALSE(key->Allows("Bearer second line"));
}

TEST(ApiKeyTest, BadFlagsAreRefusedWithoutTheKey) {
  EXPECT_THAT(ApiKey::FromFlags("a", WriteFile("key_both", "b\n")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--api-key and --api-key-file: give one of them"));
  EXPECT_THAT(ApiKey::FromFlags("", WriteFile("key_empty", "\n")),
              StatusIs(absl::StatusCode::kInvalidArgument, "its first line is empty"));
  EXPECT_THAT(ApiKey::FromFlags("", ::testing::TempDir() + "no_such_key_file"),
              StatusIs(absl::StatusCode::kNotFound, "cannot be read"));
  const std::vector<std::string> bad_keys = {"with space", "tab\tkey", "caf\xc3\xa9",
                                             std::string("nul\0x", 5)};
  for (const std::string& bad : bad_keys) {
    auto key = ApiKey::FromFlags(bad, "");
    EXPECT_THAT(key, StatusIs(absl::StatusCode::kInvalidArgument, "visible ASCII"));
    if (!key.ok()) EXPECT_EQ(key.status().message().find(bad), std::string::npos);
  }
}

}  // namespace
}  // namespace infer
