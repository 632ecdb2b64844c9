#include "server/kserve/proto_codec.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/kserve/input_checks.h"

namespace infer {
namespace {

using InputProto = inference::ModelInferRequest::InferInputTensor;

// Copies a repeated typed field into tensor bytes as `Dst`, checking its
// length against the shape and every value against Dst's range.
template <typename Dst, typename Repeated>
absl::Status CopyTyped(const Repeated& field, absl::string_view field_name, int64_t count,
                       absl::string_view what, Tensor* t) {
  if (static_cast<int64_t>(field.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", field.size(), " values in contents.", field_name, "; its shape ",
        ShapeToString(t->shape), " and datatype ", DataTypeName(t->dtype), " need ", count));
  }
  t->data.resize(static_cast<size_t>(count) * sizeof(Dst));
  Dst* out = t->mutable_as<Dst>();
  for (int64_t i = 0; i < count; ++i) {
    const auto v = field.Get(static_cast<int>(i));
    using Src = std::remove_cv_t<decltype(v)>;
    if constexpr (std::is_integral_v<Dst> && !std::is_same_v<Dst, bool> &&
                  sizeof(Dst) < sizeof(Src)) {
      if (v < static_cast<Src>(std::numeric_limits<Dst>::min()) ||
          v > static_cast<Src>(std::numeric_limits<Dst>::max())) {
        return absl::InvalidArgumentError(absl::StrCat(what, " value ", v, " at index ", i,
                                                       " does not fit ", DataTypeName(t->dtype)));
      }
    }
    out[i] = static_cast<Dst>(v);
  }
  return absl::OkStatus();
}

// BYTES elements in the raw KServe layout: 4-byte little-endian length, data.
absl::Status CopyBytes(const InputProto& input, int64_t count, absl::string_view what, Tensor* t) {
  const auto& field = input.contents().bytes_contents();
  if (static_cast<int64_t>(field.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", field.size(),
                                                   " values in contents.bytes_contents; its shape ",
                                                   ShapeToString(t->shape), " needs ", count));
  }
  for (const std::string& s : field) {
    if (s.size() > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " element is over 4 GiB"));
    }
    AppendBytesElement(s, &t->data);
  }
  return absl::OkStatus();
}

absl::Status FromTypedContents(const InputProto& input, int64_t count, absl::string_view what,
                               Tensor* t) {
  const inference::InferTensorContents& c = input.contents();
  switch (t->dtype) {
    case DataType::kBool:
      return CopyTyped<bool>(c.bool_contents(), "bool_contents", count, what, t);
    case DataType::kUint8:
      return CopyTyped<uint8_t>(c.uint_contents(), "uint_contents", count, what, t);
    case DataType::kUint16:
      return CopyTyped<uint16_t>(c.uint_contents(), "uint_contents", count, what, t);
    case DataType::kUint32:
      return CopyTyped<uint32_t>(c.uint_contents(), "uint_contents", count, what, t);
    case DataType::kUint64:
      return CopyTyped<uint64_t>(c.uint64_contents(), "uint64_contents", count, what, t);
    case DataType::kInt8:
      return CopyTyped<int8_t>(c.int_contents(), "int_contents", count, what, t);
    case DataType::kInt16:
      return CopyTyped<int16_t>(c.int_contents(), "int_contents", count, what, t);
    case DataType::kInt32:
      return CopyTyped<int32_t>(c.int_contents(), "int_contents", count, what, t);
    case DataType::kInt64:
      return CopyTyped<int64_t>(c.int64_contents(), "int64_contents", count, what, t);
    case DataType::kFp32:
      return CopyTyped<float>(c.fp32_contents(), "fp32_contents", count, what, t);
    case DataType::kFp64:
      return CopyTyped<double>(c.fp64_contents(), "fp64_contents", count, what, t);
    case DataType::kBytes:
      return CopyBytes(input, count, what, t);
    case DataType::kFp16:
    case DataType::kBf16:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has datatype ", DataTypeName(t->dtype),
                   ", which has no typed contents field; send it in raw_input_contents"));
}

}  // namespace

absl::StatusOr<InferRequest> RequestFromProto(inference::ModelInferRequest* proto) {
  InferRequest request;
  request.model_name = proto->model_name();
  request.id = proto->id();
  const int num_inputs = proto->inputs_size();
  const int num_raw = proto->raw_input_contents_size();
  const bool use_raw = num_raw > 0;
  if (use_raw && num_raw != num_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", num_raw, " raw_input_contents entries for ", num_inputs,
                     " inputs; it must have exactly one per input, in input order"));
  }
  request.inputs.reserve(num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const InputProto& input = proto->inputs(i);
    // Built only for an error message (CheckNamed): this runs per request.
    auto what = [&input] { return absl::StrCat("input ", Quote(input.name())); };
    Tensor t;
    t.name = input.name();
    INFER_ASSIGN_OR_RETURN(
        t.dtype,
        CheckNamed([&](absl::string_view w) { return InputDataType(input.datatype(), w); }, what));
    t.shape.assign(input.shape().begin(), input.shape().end());
    INFER_ASSIGN_OR_RETURN(
        const int64_t count,
        CheckNamed([&](absl::string_view w) { return ElementCount(t.shape, w); }, what));
    if (use_raw) {
      if (input.has_contents()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what(),
                         " sets 'contents' but the request uses raw_input_contents; "
                         "use one or the other"));
      }
      std::string* raw = proto->mutable_raw_input_contents(i);
      if (t.dtype != DataType::kBytes) {
        INFER_RETURN_IF_ERROR(CheckNamed(
            [&](absl::string_view w) {
              return CheckRawInputSize(t.dtype, t.shape, raw->size(), w);
            },
            what));
      }
      t.data.swap(*raw);
    } else {
      INFER_RETURN_IF_ERROR(CheckNamed(
          [&](absl::string_view w) { return FromTypedContents(input, count, w, &t); }, what));
    }
    request.inputs.push_back(std::move(t));
  }
  for (const auto& out : proto->outputs()) request.requested_outputs.push_back(out.name());
  // Scheduling parameters, as Triton names them, and the text parameters;
  // others are ignored.
  for (const auto& [key, value] : proto->parameters()) {
    if (IsTextParameter(key)) {
      const bool flag = value.bool_param();
      const bool is_bool = value.parameter_choice_case() == inference::InferParameter::kBoolParam;
      const bool is_string =
          value.parameter_choice_case() == inference::InferParameter::kStringParam;
      // An integer: int64, or uint64 within it (larger ones are refused as
      // not positive).
      int64_t number = -1;
      const bool is_number =
          value.parameter_choice_case() == inference::InferParameter::kInt64Param ||
          value.parameter_choice_case() == inference::InferParameter::kUint64Param;
      if (value.parameter_choice_case() == inference::InferParameter::kInt64Param) {
        number = value.int64_param();
      } else if (is_number && value.uint64_param() <= static_cast<uint64_t>(INT64_MAX)) {
        number = static_cast<int64_t>(value.uint64_param());
      }
      INFER_RETURN_IF_ERROR(ApplyTextParameter(key, is_bool ? &flag : nullptr,
                                               is_string ? &value.string_param() : nullptr,
                                               is_number ? &number : nullptr, &request));
      continue;
    }
    if (!IsSchedulingParameter(key)) continue;
    int64_t v = 0;
    if (value.parameter_choice_case() == inference::InferParameter::kInt64Param) {
      v = value.int64_param();
    } else if (value.parameter_choice_case() == inference::InferParameter::kUint64Param &&
               value.uint64_param() <= static_cast<uint64_t>(INT64_MAX)) {
      v = static_cast<int64_t>(value.uint64_param());
    } else {
      return SchedulingParameterNotAnInteger(key);
    }
    INFER_RETURN_IF_ERROR(ApplySchedulingParameter(key, v, &request));
  }
  return request;
}

void ResponseToProto(InferResponse response, inference::ModelInferResponse* proto) {
  proto->set_model_name(response.model_name);
  proto->set_model_version("1");
  proto->set_id(response.id);
  for (Tensor& t : response.outputs) {
    auto* out = proto->add_outputs();
    out->set_name(t.name);
    const absl::string_view datatype = DataTypeName(t.dtype);
    out->set_datatype(datatype.data(), datatype.size());
    out->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    proto->add_raw_output_contents()->swap(t.data);
  }
}

namespace {

// Triton's enum value for a KServe datatype: TYPE_ and the name, except
// that BYTES is TYPE_STRING.
inference::DataType TritonDataType(DataType dtype) {
  const absl::string_view name = DataTypeName(dtype);
  inference::DataType out = inference::TYPE_INVALID;
  inference::DataType_Parse(absl::StrCat("TYPE_", name == "BYTES" ? "STRING" : name), &out);
  return out;
}

template <typename T>
void FillConfigTensor(const TensorSpec& spec, T* out) {
  out->set_name(spec.name);
  out->set_data_type(TritonDataType(spec.dtype));
  for (size_t i = 1; i < spec.shape.size(); ++i) out->add_dims(spec.shape[i]);
}

}  // namespace

void ModelConfigToProto(const ModelSpec& spec, const QueueOptions& queue, const DeviceInfo& device,
                        inference::ModelConfig* proto) {
  proto->set_name(spec.name);
  proto->set_platform(spec.platform);
  proto->set_backend(spec.backend);
  proto->set_max_batch_size(static_cast<int32_t>(queue.max_batch_size));
  for (const TensorSpec& t : spec.inputs) {
    inference::ModelInput* input = proto->add_input();
    FillConfigTensor(t, input);
    input->set_optional(t.optional);
  }
  for (const TensorSpec& t : spec.outputs) FillConfigTensor(t, proto->add_output());
  inference::ModelInstanceGroup* group = proto->add_instance_group();
  group->set_name(spec.name);
  group->set_count(1);
  if (device.kind == DeviceKind::kCuda) {
    group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
    group->add_gpus(device.ordinal);
  } else {
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  inference::ModelDynamicBatching* batching = proto->mutable_dynamic_batching();
  batching->set_max_queue_delay_microseconds(
      static_cast<uint64_t>(absl::ToInt64Microseconds(queue.max_queue_delay)));
  batching->set_priority_levels(static_cast<uint64_t>(queue.priority_levels));
  batching->set_default_priority_level(static_cast<uint64_t>(
      queue.default_priority_level == 0 ? queue.priority_levels : queue.default_priority_level));
  inference::ModelQueuePolicy* policy = batching->mutable_default_queue_policy();
  policy->set_max_queue_size(static_cast<uint32_t>(queue.max_queue_size));
  policy->set_default_timeout_microseconds(
      static_cast<uint64_t>(absl::ToInt64Microseconds(queue.default_timeout)));
  if (!spec.precision.empty()) {
    (*proto->mutable_parameters())["precision"].set_string_value(spec.precision);
  }
  if (!spec.precision_reason.empty()) {
    (*proto->mutable_parameters())["precision_reason"].set_string_value(spec.precision_reason);
  }
  if (spec.batch_invariant) {
    (*proto->mutable_parameters())["batch_invariant"].set_string_value("true");
  }
  // Inputs declared INT64 that take INT32 too (ModelInput has one data_type).
  if (const std::vector<std::string> int32_inputs = Int32InputNames(spec); !int32_inputs.empty()) {
    (*proto->mutable_parameters())["int32_accepted_inputs"].set_string_value(
        absl::StrJoin(int32_inputs, ","));
  }
}

}  // namespace infer
