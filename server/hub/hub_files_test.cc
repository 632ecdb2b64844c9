#include "server/hub/hub_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace infer::hub {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Paths(const std::vector<const RepoFile*>& files) {
  std::vector<std::string> out;
  for (const RepoFile* f : files) out.push_back(f->path);
  return out;
}

std::vector<RepoFile> Tree(std::initializer_list<const char*> paths) {
  std::vector<RepoFile> tree;
  for (const char* p : paths) tree.push_back(RepoFile{p, 1, "", ""});
  return tree;
}

TEST(HubFilesTest, ParsesTheHubsListing) {
  absl::StatusOr<std::vector<RepoFile>> tree = ParseTreeListing(R"([
    {"type": "directory", "oid": "d", "size": 0, "path": "1_Pooling"},
    {"type": "file", "oid": "a1", "size": 190, "path": "1_Pooling/config.json"},
    {"type": "file", "oid": "b2", "size": 90868376, "path": "model.safetensors",
     "lfs": {"oid": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
             "size": 90868376, "pointerSize": 135}}])");
  ASSERT_TRUE(tree.ok()) << tree.status();
  ASSERT_EQ(tree->size(), 2u);
  EXPECT_EQ((*tree)[0].path, "1_Pooling/config.json");
  EXPECT_EQ((*tree)[0].blob_id, "a1");
  EXPECT_TRUE((*tree)[0].lfs_sha256.empty());
  EXPECT_EQ((*tree)[1].size, 90868376);
  EXPECT_EQ((*tree)[1].lfs_sha256,
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db");
}

TEST(HubFilesTest, RefusesListingsThatLeaveTheSnapshot) {
  EXPECT_FALSE(ParseTreeListing(R"([{"type": "file", "size": 1, "path": "../../x"}])").ok());
  EXPECT_FALSE(ParseTreeListing(R"([{"type": "file", "size": 1, "path": "/etc/x"}])").ok());
  EXPECT_FALSE(ParseTreeListing(R"({"path": "x"})").ok());
  EXPECT_FALSE(ParseTreeListing(R"([{"type": "file", "size": -1, "path": "x"}])").ok());
  EXPECT_FALSE(
      ParseTreeListing(R"([{"type": "file", "size": 18446744073709551615, "path": "x"}])").ok());
  EXPECT_FALSE(ParseTreeListing("[").ok());
}

TEST(HubFilesTest, MetadataIsWhatTheLoaderReads) {
  const std::vector<RepoFile> tree =
      Tree({".gitattributes", "README.md", "config.json", "tokenizer.json", "vocab.txt",
            "tokenizer_config.json", "modules.json", "onnx/model.onnx", "pytorch_model.bin",
            "model.safetensors", "1_Pooling/config.json", "sentence_bert_config.json"});
  absl::StatusOr<std::vector<const RepoFile*>> meta = MetadataFiles(tree);
  ASSERT_TRUE(meta.ok());
  // vocab.txt is left out: tokenizer.json is read instead.
  EXPECT_EQ(Paths(*meta), (std::vector<std::string>{"README.md", "config.json", "tokenizer.json",
                                                    "tokenizer_config.json", "modules.json",
                                                    "sentence_bert_config.json"}));
  EXPECT_EQ(MetadataFiles(Tree({"model.safetensors"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

class ContentFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "hub_files_test.XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(ContentFilesTest, WeightsAndTheModulesFolders) {
  Write("modules.json",
        R"([{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    {"idx": 3, "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}])");
  const std::vector<RepoFile> tree =
      Tree({"config.json", "modules.json", "model.safetensors", "pytorch_model.bin",
            "1_Pooling/config.json", "2_Dense/config.json", "2_Dense/model.safetensors",
            "2_Dense/pytorch_model.bin", "9_Other/config.json"});
  absl::StatusOr<std::vector<const RepoFile*>> content = ContentFiles(tree, dir_);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(Paths(*content),
            (std::vector<std::string>{"model.safetensors", "1_Pooling/config.json",
                                      "2_Dense/config.json", "2_Dense/model.safetensors"}));
}

TEST_F(ContentFilesTest, ShardsTheIndexNames) {
  Write("model.safetensors.index.json",
        R"({"metadata": {"total_size": 10}, "weight_map": {"a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})");
  const std::vector<RepoFile> tree =
      Tree({"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors", "1_Pooling/config.json"});
  absl::StatusOr<std::vector<const RepoFile*>> content = ContentFiles(tree, dir_);
  ASSERT_TRUE(content.ok()) << content.status();
  // Without modules.json, 1_Pooling is where the loader looks.
  EXPECT_EQ(Paths(*content), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                       "model-00002-of-00002.safetensors",
                                                       "1_Pooling/config.json"}));
  // A shard the listing lacks, or one outside the folder.
  const std::vector<RepoFile> partial =
      Tree({"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"});
  EXPECT_EQ(ContentFiles(partial, dir_).status().code(), absl::StatusCode::kFailedPrecondition);
  Write("model.safetensors.index.json", R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_FALSE(ContentFiles(tree, dir_).ok());
}

TEST_F(ContentFilesTest, NoSafetensorsIsRefusedNamingWhatThereIs) {
  absl::StatusOr<std::vector<const RepoFile*>> content =
      ContentFiles(Tree({"config.json", "pytorch_model.bin", "tf_model.h5"}), dir_);
  EXPECT_EQ(content.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(content.status().message().find("no safetensors weights"), std::string::npos);
  EXPECT_NE(content.status().message().find("pytorch_model.bin, tf_model.h5"), std::string::npos);
}

}  // namespace
}  // namespace infer::hub
