#include "runtime/json_parse.h"

#include <cstddef>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

using nlohmann::json;

// nlohmann's DOM builder with a depth count in front of it. The builder is
// in nlohmann's detail namespace; json::parse drives the same class, and
// Debian 12 pins nlohmann-json3 at 3.11.2. Returning false from a SAX event
// stops the parser at once.
class DepthBoundedDom {
 public:
  DepthBoundedDom(json* root, int max_depth)
      : dom_(*root, /*allow_exceptions=*/false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return Open() && dom_.start_object(n); }
  bool start_array(std::size_t n) { return Open() && dom_.start_array(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    error_byte_ = position;
    return dom_.parse_error(position, token, e);
  }

  bool too_deep() const { return too_deep_; }
  std::size_t error_byte() const { return error_byte_; }

 private:
  bool Open() {
    if (++depth_ > max_depth_) {
      too_deep_ = true;
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  std::size_t error_byte_ = 0;
};

}  // namespace

absl::StatusOr<json> ParseJson(absl::string_view text, absl::string_view what, int max_depth) {
  json root;
  DepthBoundedDom handler(&root, max_depth);
  const bool ok = json::sax_parse(text.begin(), text.end(), &handler);
  if (handler.too_deep()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " nests arrays and objects deeper than ",
                                                   max_depth, " levels (the server's limit)"));
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not valid JSON (at byte ", handler.error_byte(), ")"));
  }
  return root;
}

absl::StatusOr<std::optional<json>> ParseOptionalJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<json>();
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFER_ASSIGN_OR_RETURN(json j, ParseJson(text, path));
  return std::optional<json>(std::move(j));
}

std::string QuoteJson(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return Quote(value.get_ref<const std::string&>());
    case json::value_t::array:
      return absl::StrCat("an array of ", value.size(), value.size() == 1 ? " value" : " values");
    case json::value_t::object:
      return absl::StrCat("an object of ", value.size(),
                          value.size() == 1 ? " member" : " members");
    case json::value_t::binary:
      return "binary data";
    default:  // null, boolean, numbers: a few bytes at most
      return value.dump();
  }
}

}  // namespace infer
