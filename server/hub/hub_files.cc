#include "server/hub/hub_files.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"
#include "server/hub/hub_cache.h"

namespace infer::hub {
namespace {

using nlohmann::json;

const RepoFile* Find(const std::vector<RepoFile>& tree, absl::string_view path) {
  for (const RepoFile& f : tree) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

// The folders modules.json puts sentence-transformers modules in (the
// Transformer's own, the repository's root, is not one); 1_Pooling when
// there is no modules.json, where the loader looks by default.
absl::StatusOr<std::vector<std::string>> ModuleFolders(const std::vector<RepoFile>& tree,
                                                       const std::string& dir) {
  if (Find(tree, "modules.json") == nullptr) return std::vector<std::string>{"1_Pooling"};
  INFER_ASSIGN_OR_RETURN(std::optional<json> modules, ParseOptionalJsonFile(dir + "/modules.json"));
  if (!modules.has_value() || !modules->is_array()) {
    return absl::InvalidArgumentError("modules.json is not a list of modules");
  }
  std::vector<std::string> folders;
  for (const json& m : *modules) {
    if (!m.is_object()) continue;
    auto p = m.find("path");
    if (p == m.end() || !p->is_string()) continue;
    absl::string_view path = p->get_ref<const std::string&>();
    while (absl::ConsumeSuffix(&path, "/")) {
    }
    if (path.empty() || path == ".") continue;
    INFER_RETURN_IF_ERROR(CheckRepoPath(path));
    folders.emplace_back(path);
  }
  return folders;
}

// The shards the index's weight_map names, each once, in order of first use.
absl::StatusOr<std::vector<std::string>> Shards(const std::string& dir) {
  const std::string name = "model.safetensors.index.json";
  INFER_ASSIGN_OR_RETURN(std::optional<json> index, ParseOptionalJsonFile(dir + "/" + name));
  if (!index.has_value() || !index->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a JSON object"));
  }
  auto map = index->find("weight_map");
  if (map == index->end() || !map->is_object() || map->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has no weight_map"));
  }
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": the file of tensor '", tensor, "' is not a string"));
    }
    const std::string& f = file.get_ref<const std::string&>();
    INFER_RETURN_IF_ERROR(CheckRepoPath(f));
    if (seen.insert(f).second) shards.push_back(f);
  }
  return shards;
}

}  // namespace

absl::StatusOr<std::vector<RepoFile>> ParseTreeListing(absl::string_view text) {
  INFER_ASSIGN_OR_RETURN(json doc, ParseJson(text, "the hub's tree listing"));
  if (!doc.is_array()) {
    return absl::InvalidArgumentError("the hub's tree listing is not a JSON array");
  }
  std::vector<RepoFile> files;
  for (const json& e : doc) {
    if (!e.is_object()) return absl::InvalidArgumentError("a tree entry is not a JSON object");
    auto type = e.find("type");
    if (type != e.end() && type->is_string() && *type != "file") continue;
    auto path = e.find("path");
    auto size = e.find("size");
    if (path == e.end() || !path->is_string() || size == e.end() || !size->is_number_unsigned() ||
        size->get<uint64_t>() > (uint64_t{1} << 50)) {
      return absl::InvalidArgumentError(
          "a tree entry has no string 'path' or no integer 'size' (up to 2^50 bytes)");
    }
    RepoFile f;
    f.path = path->get<std::string>();
    INFER_RETURN_IF_ERROR(CheckRepoPath(f.path));
    f.size = size->get<int64_t>();
    if (auto oid = e.find("oid"); oid != e.end() && oid->is_string()) f.blob_id = *oid;
    if (auto lfs = e.find("lfs"); lfs != e.end() && lfs->is_object()) {
      if (auto oid = lfs->find("oid"); oid != lfs->end() && oid->is_string()) {
        f.lfs_sha256 = *oid;
      }
    }
    files.push_back(std::move(f));
  }
  return files;
}

absl::StatusOr<std::vector<const RepoFile*>> MetadataFiles(const std::vector<RepoFile>& tree) {
  if (Find(tree, "config.json") == nullptr) {
    return absl::FailedPreconditionError(
        "has no config.json at its root: it is no transformers model folder");
  }
  const bool has_tokenizer_json = Find(tree, "tokenizer.json") != nullptr;
  static const std::set<std::string> kNames = {
      "config.json",
      "tokenizer.json",
      "tokenizer_config.json",
      "special_tokens_map.json",
      "vocab.txt",  // read only when there is no tokenizer.json
      "modules.json",
      "sentence_bert_config.json",
      "config_sentence_transformers.json",
      "README.md",
      "model.safetensors.index.json",
  };
  std::vector<const RepoFile*> out;
  for (const RepoFile& f : tree) {
    if (kNames.count(f.path) == 0) continue;
    if (f.path == "vocab.txt" && has_tokenizer_json) continue;
    out.push_back(&f);
  }
  return out;
}

absl::StatusOr<std::vector<const RepoFile*>> ContentFiles(
    const std::vector<RepoFile>& tree, const std::string& metadata_dir,
    const std::vector<std::string>& extra_folders) {
  std::vector<const RepoFile*> out;
  if (Find(tree, "model.safetensors.index.json") != nullptr) {
    INFER_ASSIGN_OR_RETURN(std::vector<std::string> shards, Shards(metadata_dir));
    for (const std::string& s : shards) {
      const RepoFile* f = Find(tree, s);
      if (f == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model.safetensors.index.json names the shard ", s, ", which the repository lacks"));
      }
      out.push_back(f);
    }
  } else if (const RepoFile* f = Find(tree, "model.safetensors"); f != nullptr) {
    out.push_back(f);
  } else {
    std::vector<std::string> others;
    for (const RepoFile& f : tree) {
      if (f.path.find('/') != std::string::npos) continue;
      for (const char* ext : {".bin", ".pt", ".pth", ".onnx", ".gguf", ".h5", ".msgpack"}) {
        if (absl::EndsWith(f.path, ext) && others.size() < 5) others.push_back(f.path);
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "has no safetensors weights (model.safetensors or model.safetensors.index.json)",
        others.empty() ? std::string()
                       : absl::StrCat("; it has ", absl::StrJoin(others, ", "),
                                      ", which this server does not read (convert them to "
                                      "safetensors, e.g. with the hub's convert space)")));
  }
  INFER_ASSIGN_OR_RETURN(std::vector<std::string> folders, ModuleFolders(tree, metadata_dir));
  for (const std::string& f : extra_folders) {
    INFER_RETURN_IF_ERROR(CheckRepoPath(f));
    if (std::find(folders.begin(), folders.end(), f) == folders.end()) folders.push_back(f);
  }
  for (const std::string& folder : folders) {
    const std::string prefix = folder + "/";
    for (const RepoFile& f : tree) {
      if (absl::StartsWith(f.path, prefix) &&
          (absl::EndsWith(f.path, ".json") || absl::EndsWith(f.path, ".safetensors"))) {
        out.push_back(&f);
      }
    }
  }
  return out;
}

}  // namespace infer::hub
