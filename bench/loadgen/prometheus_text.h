// A reader of the Prometheus text exposition format (version 0.0.4): sample
// lines `name{label="value",...} value [timestamp]`. Strict by default, for
// tests of our own exposition: every family must also be announced by # HELP
// and then # TYPE before its samples, and histogram series must be cumulative
// and end in le="+Inf" equal to _count. Lenient for scraping other servers
// (infer-bench): the syntax only. Also a plain HTTP GET to scrape a live
// endpoint.
#ifndef INFER_BENCH_LOADGEN_PROMETHEUS_TEXT_H_
#define INFER_BENCH_LOADGEN_PROMETHEUS_TEXT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infer::loadgen {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct ParseOptions {
  // Also require # HELP and # TYPE for every family, and check histograms.
  bool strict = true;
};
// Parses and checks `text`; INVALID_ARGUMENT naming the line otherwise.
// Timestamps are read and dropped.
absl::StatusOr<std::vector<Sample>> ParsePrometheusText(const std::string& text,
                                                        const ParseOptions& options = {});

// Sum of the samples named `name` whose labels include all of `labels`.
double SumOf(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& labels = {});
// Number of samples named `name` (with those labels).
int CountOf(const std::vector<Sample>& samples, const std::string& name,
            const std::map<std::string, std::string>& labels = {});

// What Prometheus' histogram_quantile(q, name_bucket{labels}) returns.
double HistogramQuantile(const std::vector<Sample>& samples, const std::string& name, double q,
                         const std::map<std::string, std::string>& labels);

// GET http://host:port/path (host an IPv4 address or "localhost") over a
// plain socket with a 10 s timeout; the body, or an error for a non-200
// answer.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path);
inline absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  return HttpGet("127.0.0.1", port, path);
}

// The samples of everything in `after` less the same series in `before`
// (counters and histogram buckets become deltas; series new in `after` are
// kept whole).
std::vector<Sample> Delta(const std::vector<Sample>& after, const std::vector<Sample>& before);

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_PROMETHEUS_TEXT_H_
