#include "server/kserve/model_repository.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/precision.h"
#include "models/registry.h"
#include "runtime/status_macros.h"
#include "server/kserve/proto_codec.h"

namespace infer {
namespace {

// Collects TextFormat's errors so they can be returned instead of logged.
class ErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
    }
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

std::string DimsText(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

bool DimsMatch(const google::protobuf::RepeatedField<int64_t>& declared,
               const google::protobuf::RepeatedField<int64_t>& served) {
  if (declared.size() != served.size()) return false;
  for (int i = 0; i < declared.size(); ++i) {
    if (declared[i] != served[i] && declared[i] != -1 && served[i] != -1) return false;
  }
  return true;
}

// One declared input or output against the tensors the backend serves;
// `int32_ok`: inputs served as INT64 that take INT32 too (TYPE_INT32 may be
// declared for them, as Triton configs often do for token ids).
template <typename T>
absl::Status CheckDeclaredTensor(absl::string_view field, const T& declared,
                                 const google::protobuf::RepeatedPtrField<T>& served,
                                 const std::vector<std::string>& int32_ok = {}) {
  std::vector<std::string> names;
  for (const T& t : served) {
    if (t.name() != declared.name()) {
      names.push_back(t.name());
      continue;
    }
    const bool widened = declared.data_type() == inference::TYPE_INT32 &&
                         t.data_type() == inference::TYPE_INT64 &&
                         absl::c_linear_search(int32_ok, t.name());
    if (t.data_type() != declared.data_type() && !widened) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", field, "' '", declared.name(), "' has data_type ",
                       inference::DataType_Name(declared.data_type()),
                       "; the backend serves it as ", inference::DataType_Name(t.data_type())));
    }
    if (!DimsMatch(declared.dims(), t.dims())) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", field, "' '", declared.name(), "' has dims ",
                       DimsText(declared.dims()), "; the backend serves it with dims ",
                       DimsText(t.dims()), " (without the batch dimension; -1 is any size)"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("field '", field, "' names '", declared.name(),
                                                 "', which the backend does not have (it has ",
                                                 absl::StrJoin(names, ", "), ")"));
}

// Triton's interface fields of a config, if given, against what the loaded
// model serves on this device (see protos/model_config.proto).
absl::Status CheckTritonFields(const config::ModelConfig& config, const ModelSpec& spec,
                               const QueueOptions& queue, const DeviceInfo& device) {
  inference::ModelConfig served;
  ModelConfigToProto(spec, queue, device, &served);
  if (!config.platform().empty() && config.platform() != served.platform()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'platform' = '", config.platform(),
                     "': this model is served by the built-in backend '", served.backend(),
                     "', platform '", served.platform(), "' (or leave platform out)"));
  }
  const std::vector<std::string> int32_ok = Int32InputNames(spec);
  for (const inference::ModelInput& in : config.input()) {
    INFER_RETURN_IF_ERROR(CheckDeclaredTensor("input", in, served.input(), int32_ok));
  }
  if (config.input_size() > 0) {
    for (const inference::ModelInput& in : served.input()) {
      const bool listed = std::any_of(config.input().begin(), config.input().end(),
                                      [&](const auto& d) { return d.name() == in.name(); });
      if (!in.optional() && !listed) {
        return absl::InvalidArgumentError(
            absl::StrCat("field 'input' leaves out '", in.name(), "', which the backend requires"));
      }
    }
  }
  for (const inference::ModelOutput& out : config.output()) {
    INFER_RETURN_IF_ERROR(CheckDeclaredTensor("output", out, served.output()));
  }
  if (config.instance_group_size() > 1) {
    return absl::InvalidArgumentError(
        "field 'instance_group': one group at most (one executor per device serves each model)");
  }
  if (config.instance_group_size() == 1) {
    const inference::ModelInstanceGroup& g = config.instance_group(0);
    const inference::ModelInstanceGroup& s = served.instance_group(0);
    if (g.count() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'instance_group.count' = ", g.count(),
                       ": one instance per device (the device pipeline overlaps batches instead)"));
    }
    const bool kind_ok =
        g.kind() == inference::ModelInstanceGroup::KIND_AUTO || g.kind() == s.kind();
    const bool gpus_ok =
        g.gpus().empty() || (g.gpus_size() == 1 && s.gpus_size() == 1 && g.gpus(0) == s.gpus(0));
    if (!kind_ok || !gpus_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field 'instance_group' asks for ", inference::ModelInstanceGroup::Kind_Name(g.kind()),
          g.gpus().empty() ? "" : absl::StrCat(" gpus [", absl::StrJoin(g.gpus(), ", "), "]"),
          " but this server runs on ", device.kind == DeviceKind::kCuda ? "a GPU" : "the CPU",
          " (--device); every model is served there"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<config::ModelConfig> ParseModelConfig(const std::string& path,
                                                     const std::string& text) {
  config::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  // The schema nests 3 deep; protobuf's own default is unbounded, and a
  // nested unknown field would be skipped recursively.
  parser.SetRecursionLimit(32);
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", errors.error()));
  }
  auto bad = [&](absl::string_view field, auto value, absl::string_view rule) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field '", field, "' = ", value, " ", rule));
  };
  if (config.max_batch_size() < 0) {
    return bad("max_batch_size", config.max_batch_size(), "must be >= 1 (or unset)");
  }
  if (config.dynamic_batching().max_queue_delay_microseconds() > 60'000'000) {
    return bad("dynamic_batching.max_queue_delay_microseconds",
               config.dynamic_batching().max_queue_delay_microseconds(),
               "must be at most 60000000 (one minute)");
  }
  {
    const config::DynamicBatching& d = config.dynamic_batching();
    if (d.priority_levels() > 1000) {
      return bad("dynamic_batching.priority_levels", d.priority_levels(), "must be at most 1000");
    }
    // priority_levels unset means one level.
    if (d.default_priority_level() > std::max<uint64_t>(1, d.priority_levels())) {
      return bad("dynamic_batching.default_priority_level", d.default_priority_level(),
                 absl::StrCat("must be within priority_levels (",
                              std::max<uint64_t>(1, d.priority_levels()), ")"));
    }
    for (int i = 0; i < d.length_buckets_size(); ++i) {
      if (d.length_buckets(i) < 1 || (i > 0 && d.length_buckets(i) <= d.length_buckets(i - 1))) {
        return bad("dynamic_batching.length_buckets", d.length_buckets(i),
                   "breaks the rule: buckets are positive and ascending");
      }
    }
    if (d.max_batch_tokens() > (uint64_t{1} << 40)) {
      return bad("dynamic_batching.max_batch_tokens", d.max_batch_tokens(), "is too large");
    }
  }
  {
    const config::RequestLimits& l = config.request_limits();
    constexpr uint64_t kMax = uint64_t{1} << 40;
    for (const auto& [field, value] :
         {std::pair{"max_client_batch_size", l.max_client_batch_size()},
          std::pair{"max_input_length", l.max_input_length()},
          std::pair{"max_request_tokens", l.max_request_tokens()},
          std::pair{"max_tensor_elements", l.max_tensor_elements()},
          std::pair{"max_text_bytes", l.max_text_bytes()}}) {
      if (value > kMax) {
        return bad(absl::StrCat("request_limits.", field), value, "is too large (at most 2^40)");
      }
    }
  }
  if (const uint64_t t = config.optimization().cuda().graph_max_tokens(); t > (1u << 20)) {
    return bad("optimization.cuda.graph_max_tokens", t, "is too large (at most 1048576)");
  }
  if (config.backend().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field 'backend' is required"));
  }
  if (!config.precision().empty()) {
    if (absl::Status s = ParsePrecision(config.precision()).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": field 'precision': ", s.message()));
    }
  }
  return config;
}

CudaGraphsConfig GraphsFromConfig(const config::ModelConfig& config) {
  const config::ModelOptimizationPolicy::Cuda& cuda = config.optimization().cuda();
  CudaGraphsConfig g;
  if (cuda.has_graphs()) g.enabled = cuda.graphs();
  g.max_tokens = static_cast<int64_t>(cuda.graph_max_tokens());
  return g;
}

QueueOptions BatchingFromConfig(const config::ModelConfig& config) {
  QueueOptions q;
  q.max_batch_size = config.max_batch_size() > 0 ? config.max_batch_size() : kDefaultMaxBatchSize;
  q.max_queue_delay = absl::Microseconds(
      config.has_dynamic_batching()
          ? static_cast<int64_t>(config.dynamic_batching().max_queue_delay_microseconds())
          : kDefaultMaxQueueDelayUs);
  const config::DynamicBatching& d = config.dynamic_batching();
  const uint32_t queue = d.default_queue_policy().max_queue_size();
  q.max_queue_size = queue > 0 ? queue : kDefaultMaxQueueSize;
  q.default_timeout = absl::Microseconds(
      static_cast<int64_t>(d.default_queue_policy().default_timeout_microseconds()));
  q.length_buckets.assign(d.length_buckets().begin(), d.length_buckets().end());
  q.max_batch_tokens = static_cast<int64_t>(d.max_batch_tokens());
  if (d.priority_levels() > 0) q.priority_levels = static_cast<int>(d.priority_levels());
  q.default_priority_level = static_cast<int>(d.default_priority_level());
  if (d.priority_aging_microseconds() > 0) {
    q.priority_aging = absl::Microseconds(static_cast<int64_t>(d.priority_aging_microseconds()));
  }
  return q;
}

RequestLimits LimitsFromConfig(const config::ModelConfig& config) {
  RequestLimits limits;
  const config::RequestLimits& l = config.request_limits();
  auto set = [](uint64_t value, int64_t* out) {
    if (value > 0) *out = static_cast<int64_t>(value);
  };
  set(l.max_client_batch_size(), &limits.max_client_batch_size);
  set(l.max_input_length(), &limits.max_input_length);
  set(l.max_request_tokens(), &limits.max_request_tokens);
  set(l.max_tensor_elements(), &limits.max_tensor_elements);
  set(l.max_text_bytes(), &limits.max_text_bytes);
  return limits;
}

absl::StatusOr<LoadedModel> LoadModelFolder(const std::string& dir, const DeviceContext& context,
                                            const DeviceInfo& device, const std::string& name,
                                            const ServingDefaults& defaults) {
  namespace fs = std::filesystem;
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path folder(trimmed);
  const fs::path config_path = folder / "config.pbtxt";
  std::error_code ec;
  config::ModelConfig config;
  // What errors name: the config.pbtxt, or the folder without one.
  std::string source = config_path.string();
  if (fs::exists(config_path, ec)) {
    std::ifstream in(config_path);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat(config_path.string(), ": cannot read the model's config"));
    }
    std::stringstream text;
    text << in.rdbuf();
    INFER_ASSIGN_OR_RETURN(config, ParseModelConfig(config_path.string(), text.str()));
  } else if (fs::exists(folder / "config.json", ec)) {
    // A Hugging Face / sentence-transformers folder as it is: the transformer
    // backend reads everything from its files, with the defaults above.
    config.set_backend(kHuggingFaceBackend);
    for (const auto& [key, value] : defaults.folder_params) {
      (*config.mutable_parameters())[key].set_string_value(value);
    }
    if (defaults.max_batch_size > 0) config.set_max_batch_size(defaults.max_batch_size);
    if (defaults.max_batch_tokens > 0 || defaults.max_queue_size > 0) {
      config::DynamicBatching* d = config.mutable_dynamic_batching();
      d->set_max_queue_delay_microseconds(kDefaultMaxQueueDelayUs);  // as when unset
      d->set_max_batch_tokens(defaults.max_batch_tokens);
      d->mutable_default_queue_policy()->set_max_queue_size(defaults.max_queue_size);
    }
    if (defaults.max_client_batch_size > 0) {
      config.mutable_request_limits()->set_max_client_batch_size(defaults.max_client_batch_size);
    }
    source = folder.string();
  } else {
    return absl::NotFoundError(
        absl::StrCat(folder.string(),
                     ": no config.pbtxt (a model's config) and no config.json (a Hugging "
                     "Face model folder)"));
  }
  LoadedModel loaded;
  loaded.source = source;
  loaded.name = name.empty() ? folder.filename().string() : name;
  if (loaded.name.empty() || loaded.name == "." || loaded.name == "..") {
    loaded.name = fs::weakly_canonical(folder, ec).filename().string();
  }
  if (!config.name().empty() && config.name() != loaded.name) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path.string(), ": field 'name' = '", config.name(), "' differs from ",
        name.empty() ? "the folder name '" : "the name it is served as, '", loaded.name, "'"));
  }
  ModelOptions options;
  options.name = loaded.name;
  options.model_dir = folder.string();
  for (const auto& [key, value] : config.parameters()) options.params[key] = value.string_value();
  // Checked by ParseModelConfig; empty means auto.
  options.precision =
      config.precision().empty() ? defaults.precision : *ParsePrecision(config.precision());
  options.precision_is_server_default =
      config.precision().empty() && defaults.precision != Precision::kAuto;
  options.cuda_graphs = GraphsFromConfig(config);
  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(config.backend(), options, context);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat(source, ": ", model.status().message()));
  }
  loaded.batching = BatchingFromConfig(config);
  loaded.limits = LimitsFromConfig(config);
  if (absl::Status s = CheckTritonFields(config, (*model)->spec(), loaded.batching, device);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  }
  loaded.model = *std::move(model);
  return loaded;
}

absl::StatusOr<std::vector<std::string>> LoadModelRepository(const std::string& dir, Engine* engine,
                                                             const ServingDefaults& defaults) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository '", dir, "' is not a directory"));
  }
  std::vector<fs::path> folders;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory()) folders.push_back(it->path());
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("model repository '", dir, "' cannot be read: ", ec.message()));
  }
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> loaded;
  for (const fs::path& folder : folders) {
    INFER_ASSIGN_OR_RETURN(LoadedModel m, LoadModelFolder(folder.string(), engine->context(),
                                                          engine->device()->info(), "", defaults));
    if (absl::Status s = engine->AddModel(std::move(m.model), m.batching, m.limits); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(m.source, ": ", s.message()));
    }
    loaded.push_back(m.name);
  }
  return loaded;
}

absl::StatusOr<std::vector<std::string>> LoadModelFolders(const std::vector<std::string>& specs,
                                                          Engine* engine,
                                                          const ServingDefaults& defaults) {
  std::vector<std::string> loaded;
  for (const std::string& spec : specs) {
    // NAME=DIR, or DIR (a folder whose name holds '=' needs the NAME= form).
    std::string name, dir = spec;
    if (const size_t eq = spec.find('='); eq != std::string::npos) {
      name = spec.substr(0, eq);
      dir = spec.substr(eq + 1);
      if (name.empty() || dir.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--model '", spec, "': expected DIR or NAME=DIR"));
      }
    }
    INFER_ASSIGN_OR_RETURN(
        LoadedModel m,
        LoadModelFolder(dir, engine->context(), engine->device()->info(), name, defaults));
    if (absl::Status s = engine->AddModel(std::move(m.model), m.batching, m.limits); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(m.source, ": ", s.message()));
    }
    loaded.push_back(m.name);
  }
  return loaded;
}

}  // namespace infer
