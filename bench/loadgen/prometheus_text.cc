#include "bench/loadgen/prometheus_text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace infer::loadgen {
namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  });
}

bool ParseValue(const std::string& s, double* v) {
  if (s == "+Inf") return *v = std::numeric_limits<double>::infinity(), true;
  if (s == "-Inf") return *v = -std::numeric_limits<double>::infinity(), true;
  if (s == "NaN") return *v = std::nan(""), true;
  return absl::SimpleAtod(s, v);
}

bool Matches(const Sample& s, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  if (s.name != name) return false;
  for (const auto& [k, v] : labels) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

// The family a sample belongs to: histogram samples carry a suffix.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      std::string base = name.substr(0, name.size() - std::string(suffix).size());
      if (types.count(base)) return base;
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<Sample>> ParsePrometheusText(const std::string& text,
                                                        const ParseOptions& options) {
  std::vector<Sample> out;
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, " (", line, "): ", why));
    };
    if (line.empty()) continue;
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      helped.insert(std::string(line.substr(0, line.find(' '))));
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2) return bad("TYPE needs a name and a type");
      static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
      if (!kTypes.count(parts[1])) return bad("unknown type");
      if (options.strict && !helped.count(parts[0])) return bad("TYPE before HELP");
      types[parts[0]] = parts[1];
      continue;
    }
    if (line[0] == '#') continue;
    // name, then optional {label="value",...}, then the value and an
    // optional timestamp (ms), separated by spaces.
    Sample s;
    const size_t name_end = std::min(line.find('{'), line.find(' '));
    if (name_end == absl::string_view::npos) return bad("no value");
    s.name = std::string(line.substr(0, name_end));
    absl::string_view rest = line.substr(name_end);
    if (absl::ConsumePrefix(&rest, "{")) {
      while (!absl::ConsumePrefix(&rest, "}")) {
        const size_t eq = rest.find("=\"");
        if (eq == absl::string_view::npos) return bad("label without =\"");
        std::string key(rest.substr(0, eq));
        rest.remove_prefix(eq + 2);
        std::string val;
        size_t i = 0;
        for (; i < rest.size() && rest[i] != '"'; ++i) {
          if (rest[i] == '\\' && i + 1 < rest.size()) {
            ++i;  // escapes: \\, \" and \n
            val.push_back(rest[i] == 'n' ? '\n' : rest[i]);
            continue;
          }
          val.push_back(rest[i]);
        }
        if (i == rest.size()) return bad("unterminated label value");
        rest.remove_prefix(i + 1);
        if (!absl::ConsumePrefix(&rest, ",") && !absl::StartsWith(rest, "}")) {
          return bad("labels must be separated by ','");
        }
        if (!ValidName(key)) return bad("bad label name");
        if (!s.labels.emplace(key, val).second) return bad("repeated label");
      }
    }
    std::vector<absl::string_view> fields = absl::StrSplit(rest, ' ', absl::SkipEmpty());
    if (fields.empty() || fields.size() > 2 || !absl::StartsWith(rest, " ")) {
      return bad("expected a value and an optional timestamp after the name and labels");
    }
    int64_t timestamp_ms = 0;
    if (fields.size() == 2 && !absl::SimpleAtoi(fields[1], &timestamp_ms)) {
      return bad("bad timestamp");
    }
    if (!ValidName(s.name)) return bad("bad metric name");
    if (!ParseValue(std::string(fields[0]), &s.value)) return bad("bad value");
    if (options.strict && FamilyOf(s.name, types).empty()) return bad("sample before its # TYPE");
    out.push_back(std::move(s));
  }
  if (!options.strict) return out;
  // Histograms: cumulative buckets ending in +Inf == _count.
  for (const auto& [family, type] : types) {
    if (type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> series;
    for (const Sample& s : out) {
      if (s.name != family + "_bucket") continue;
      auto labels = s.labels;
      double le = 0;
      if (!ParseValue(labels["le"], &le)) return absl::InvalidArgumentError("bad le");
      labels.erase("le");
      series[labels].push_back({le, s.value});
    }
    for (auto& [labels, buckets] : series) {
      for (size_t i = 1; i < buckets.size(); ++i) {
        if (buckets[i].first <= buckets[i - 1].first || buckets[i].second < buckets[i - 1].second) {
          return absl::InvalidArgumentError(absl::StrCat(family, ": buckets not cumulative"));
        }
      }
      if (buckets.empty() || !std::isinf(buckets.back().first)) {
        return absl::InvalidArgumentError(absl::StrCat(family, ": no +Inf bucket"));
      }
      double count = -1;
      for (const Sample& s : out) {
        if (s.name == family + "_count" && s.labels == labels) count = s.value;
      }
      if (count != buckets.back().second) {
        return absl::InvalidArgumentError(absl::StrCat(family, ": +Inf bucket != _count"));
      }
    }
  }
  return out;
}

double SumOf(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for (const Sample& s : samples) {
    if (Matches(s, name, labels)) sum += s.value;
  }
  return sum;
}

int CountOf(const std::vector<Sample>& samples, const std::string& name,
            const std::map<std::string, std::string>& labels) {
  int n = 0;
  for (const Sample& s : samples) n += Matches(s, name, labels);
  return n;
}

double HistogramQuantile(const std::vector<Sample>& samples, const std::string& name, double q,
                         const std::map<std::string, std::string>& labels) {
  // Buckets summed over the series that match (as sum by (le) would).
  std::map<double, double> buckets;
  for (const Sample& s : samples) {
    if (!Matches(s, name + "_bucket", labels)) continue;
    double le = 0;
    ParseValue(s.labels.at("le"), &le);
    buckets[le] += s.value;
  }
  if (buckets.empty() || buckets.rbegin()->second == 0) return std::nan("");
  const double rank = q * buckets.rbegin()->second;
  double prev_bound = 0, prev_count = 0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(le)) return prev_bound;
      return prev_bound + (le - prev_bound) * (rank - prev_count) / (count - prev_count);
    }
    prev_bound = le;
    prev_count = count;
  }
  return prev_bound;
}

std::vector<Sample> Delta(const std::vector<Sample>& after, const std::vector<Sample>& before) {
  std::map<std::pair<std::string, std::map<std::string, std::string>>, double> earlier;
  for (const Sample& s : before) earlier[{s.name, s.labels}] = s.value;
  std::vector<Sample> out = after;
  for (Sample& s : out) {
    auto it = earlier.find({s.name, s.labels});
    if (it != earlier.end()) s.value -= it->second;
  }
  return out;
}

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  const timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\nConnection: close\r\n\r\n");
  // send(MSG_NOSIGNAL): a server that closed the connection is an error
  // here, not a SIGPIPE that ends the process.
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("write failed");
  }
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return absl::InternalError("no HTTP header end");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("HTTP answer: ", status_line));
  }
  return response.substr(body + 4);
}

}  // namespace infer::loadgen
