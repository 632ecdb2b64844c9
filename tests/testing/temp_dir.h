// TempDir: a folder under the system's temp dir, named by a tag and the
// process id, made empty when created and removed with the object; for
// tests that write files (checkpoints, configs, model repositories).
// RemoveAtExit: the same clean-up for a folder a helper makes and hands out
// by path, removed when the test process exits.
// Test-only.
#ifndef INFER_TESTS_TESTING_TEMP_DIR_H_
#define INFER_TESTS_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace infer::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("infer_test_" + tag + "_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `content` (bytes as they are) to the file `name` in the folder;
  // its path.
  std::string Write(const std::string& name, const std::string& content) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << content;
    return file.string();
  }
  // A model repository entry: `name`/config.pbtxt holding `config`.
  void AddModel(const std::string& name, const std::string& config) const {
    std::filesystem::create_directories(path_ / name);
    Write(name + "/config.pbtxt", config);
  }

 private:
  std::filesystem::path path_;
};

// Removes `path` (a folder and what it holds) when the process exits
// normally; returns `path`.
inline std::string RemoveAtExit(const std::string& path) {
  struct Folders {
    std::vector<std::string> paths;
    ~Folders() {
      for (const std::string& p : paths) {
        std::error_code ignored;
        std::filesystem::remove_all(p, ignored);
      }
    }
  };
  static Folders folders;
  folders.paths.push_back(path);
  return path;
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_TEMP_DIR_H_
