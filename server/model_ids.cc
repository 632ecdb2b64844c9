#include "server/model_ids.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/hub/hub_fetch.h"

namespace infer {

namespace {

// A --model or --model-id value, [NAME=]WHAT, as {NAME, WHAT}.
std::pair<std::string, std::string> SplitNamed(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) return {"", spec};
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ResolveModelIds(
    ServerFlags* flags) {
  std::vector<std::pair<std::string, std::string>> aliases;
  std::string& served = flags->served_model_name;  // one model (ApplyTeiFlags checked)
  const bool rename = !served.empty() && served.find('/') == std::string::npos;
  std::optional<hub::HubOptions> options;
  for (const std::string& spec : flags->model_ids) {
    auto [name, id] = SplitNamed(spec);
    if (rename) name = served;
    std::error_code ec;
    if (std::filesystem::is_directory(id, ec)) {
      flags->models.push_back(name.empty() ? id : absl::StrCat(name, "=", id));
      continue;
    }
    if (!options.has_value()) {
      absl::StatusOr<hub::HubOptions> o =
          hub::HubOptionsFromEnvironment(flags->hf_token, flags->hf_token_file);
      if (!o.ok()) return o.status();
      options = *std::move(o);
      if (!flags->huggingface_hub_cache.empty()) options->cache_dir = flags->huggingface_hub_cache;
      if (!flags->dense_path.empty()) options->extra_folders.push_back(flags->dense_path);
      spdlog::info("Hugging Face Hub: {}, cache {}{}", options->endpoint, options->cache_dir,
                   options->offline ? ", offline (HF_HUB_OFFLINE)" : "");
    }
    absl::StatusOr<hub::HubModel> model = hub::FetchHubModel(id, flags->revision, *options);
    if (!model.ok()) return model.status();
    if (name.empty()) name = id.substr(id.rfind('/') + 1);
    if (name != id) aliases.emplace_back(id, name);
    if (!served.empty() && !rename && served != id) aliases.emplace_back(served, name);
    flags->models.push_back(absl::StrCat(name, "=", model->folder));
  }
  flags->model_ids.clear();
  if (!served.empty() && flags->models.size() == 1 && options == std::nullopt) {
    // The one model is a --model folder (or a --model-id folder).
    auto [name, dir] = SplitNamed(flags->models[0]);
    if (rename) {
      flags->models[0] = absl::StrCat(served, "=", dir);
    } else {
      if (name.empty()) name = std::filesystem::path(dir).filename().string();
      aliases.emplace_back(served, name);
    }
  }
  flags->hf_token.clear();
  return aliases;
}

}  // namespace infer
