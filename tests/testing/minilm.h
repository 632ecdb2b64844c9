// Where the real all-MiniLM-L6-v2 checkpoint is for tests: the INFER_MINILM_DIR
// environment variable (a machine the build did not run on, e.g. a GPU host),
// else the folder the build found (the INFER_MINILM_DIR compile definition),
// else none. Tests that need it skip, saying why, when it is empty.
#ifndef INFER_TESTS_TESTING_MINILM_H_
#define INFER_TESTS_TESTING_MINILM_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace infer::testing {

inline std::string MiniLmDir() {
  std::string dir;
  if (const char* env = std::getenv("INFER_MINILM_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
#ifdef INFER_MINILM_DIR
    dir = INFER_MINILM_DIR;
#endif
  }
  if (dir.empty() || !std::filesystem::exists(dir + "/model.safetensors")) return "";
  return dir;
}

inline constexpr char kNoMiniLm[] =
    "all-MiniLM-L6-v2 not found: run scripts/setup-venv.sh and reconfigure, or set "
    "INFER_MINILM_DIR";

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_MINILM_H_
