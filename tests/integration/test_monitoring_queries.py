"""Every metric the Grafana dashboard and the alerting rules query exists.

deploy/grafana/infer-server.json and deploy/prometheus/{alerts,slo-targets}.yml
query metrics by name; a renamed metric or a typo leaves a panel empty or an
alert that can never fire, and nothing else would notice. This test starts
the real infer-server on the CPU, sends requests so that the histograms have
samples, scrapes /metrics, and checks every metric name in every PromQL
expression of those files (and every label value they match literally,
e.g. reason="queue_full") against the scrape. Each SLO target's `le` must be
a bucket bound exactly as the server writes it. The dashboard's expressions
must also parse (promtool check rules).

The infer_gpu_* metrics (NVML) cannot be in this scrape: infer-server opens
NVML only for a CUDA device (server/main.cc), so on the CPU it never loads a
library, the real driver's or runtime/testdata/fake_nvml.cc. Their names are
checked against the ones server/gpu_metrics.cc writes instead.

Run by CTest; needs INFER_SERVER_BINARY and INFER_PROMETHEUS_DIR.
"""

import json
import os
import re
import subprocess
import tempfile
import unittest
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import yaml
from prometheus_client.parser import text_string_to_metric_families

from infer_server_process import InferServer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "infer-server.json")
RULE_FILES = [os.path.join(ROOT, "deploy", "prometheus", f)
              for f in ("alerts.yml", "slo-targets.yml")]
GPU_METRICS_SOURCE = os.path.join(ROOT, "server", "gpu_metrics.cc")

CONFIG = """
backend: "embed_pool"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 1000 length_buckets: [16, 64] }
parameters { key: "vocab_size" value { string_value: "1000" } }
parameters { key: "embedding_size" value { string_value: "32" } }
"""

# One PromQL token at a time. Strings, range and subquery brackets and
# numbers (durations included) are recognised whole, so that nothing inside
# them looks like a metric name.
TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?:ms|[smhdwy])*)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<var>\$\{?\w+\}?)
  | (?P<matchop>=~|!~|!=|=)
  | (?P<other>.)
""", re.VERBOSE)
# Followed by a parenthesised list of label names, not expressions.
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Aggregations may be followed by `by (...)` instead of their parenthesis.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile"}
KEYWORDS = GROUPING | AGGREGATIONS | {"and", "or", "unless", "bool", "offset", "inf", "nan",
                                      "atan2"}
# Labels Prometheus attaches to a target's series: never in /metrics itself.
TARGET_LABELS = {"job", "instance"}


def selectors(expr):
    """The metric selectors of a PromQL expression: (name, {label: value})
    for each, with the matchers that compare a label to a literal string."""
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr)
              if m.lastgroup != "space"]
    out = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "ident" and text.lower() in GROUPING and nxt == "(":
            # Skip the label list, which does not nest.
            i = next(j for j in range(i + 2, len(tokens)) if tokens[j][1] == ")") + 1
            continue
        if kind != "ident" or text.lower() in KEYWORDS or nxt == "(":
            i += 1  # an operator keyword, or a function or aggregation's name
            continue
        labels = {}
        i += 1
        if nxt == "{":
            i += 1
            while tokens[i][1] != "}":
                if (tokens[i][0] == "ident" and tokens[i + 1][1] == "="
                        and tokens[i + 2][0] == "string" and "$" not in tokens[i + 2][1]):
                    labels[tokens[i][1]] = tokens[i + 2][1][1:-1]
                i += 1
            i += 1
        out.append((text, labels))
    return out


def dashboard_queries(node):
    """Every PromQL expression of a Grafana dashboard: the panels' targets and
    the variables' label_values(METRIC, label) queries (their METRIC)."""
    if isinstance(node, list):
        return [q for item in node for q in dashboard_queries(item)]
    if not isinstance(node, dict):
        return []
    found = []
    for key, value in node.items():
        if key == "expr" and isinstance(value, str):
            found.append(value)
        elif key == "query" and isinstance(value, str) and node.get("type") == "query":
            m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", value)
            found.append(m.group(1) if m else value)
        elif key == "query" and isinstance(value, dict) and "query" in value:
            found.extend(dashboard_queries({"type": "query", **value}))
        else:
            found.extend(dashboard_queries(value))
    return found


def rule_queries():
    """The expressions of the rule files, the names they record, and the
    labels ({model, le}) of each SLO target."""
    exprs, recorded, slo_targets = [], set(), []
    for path in RULE_FILES:
        with open(path) as f:
            for group in yaml.safe_load(f)["groups"]:
                for rule in group["rules"]:
                    exprs.append(rule["expr"])
                    if "record" in rule:
                        recorded.add(rule["record"])
                        if rule["record"] == "model_le:infer_latency_slo:objective":
                            slo_targets.append(rule["labels"])
    return exprs, recorded, slo_targets


def gpu_metric_names():
    with open(GPU_METRICS_SOURCE) as f:
        return set(re.findall(r'"(infer_gpu_\w+)"', f.read()))


def missing(exprs, scrape, recorded, gpu_names):
    """What the expressions query that the scrape lacks: 'name' for a
    metric, 'name{label="value"}' for a literal label value no sample has."""
    problems = []
    for expr in exprs:
        for name, labels in selectors(expr):
            if name == "up" or name in recorded:
                continue
            if name not in scrape:
                if not (name.startswith("infer_gpu_") and name in gpu_names):
                    problems.append(name)
                continue
            for label, value in labels.items():
                if label not in TARGET_LABELS and not any(
                        s.get(label) == value for s in scrape[name]):
                    problems.append(f'{name}{{{label}="{value}"}}')
    return sorted(set(problems))


class SelectorTest(unittest.TestCase):
    """The extraction itself, so that an empty result cannot pass unseen."""

    def test_names_and_literal_matchers(self):
        expr = ('histogram_quantile(0.99, sum by (model, le) (rate(a_bucket{model=~"$model", '
                'kind="real"}[$__rate_interval]))) / on (model) group_left () b_total '
                'offset 1h > bool 1e3 and ignoring(le) c:rec:ratio_rate5m{le="0.05"}[5m:1m]')
        self.assertEqual(selectors(expr), [("a_bucket", {"kind": "real"}), ("b_total", {}),
                                           ("c:rec:ratio_rate5m", {"le": "0.05"})])

    def test_a_misspelled_metric_or_label_value_is_reported(self):
        scrape = {"infer_rejections_total": [{"model": "m", "reason": "queue_full"}]}
        self.assertEqual(
            missing(['rate(infer_rejection_total[5m])',
                     'rate(infer_rejections_total{reason="queue_ful", job="x"}[5m])',
                     'infer_gpu_utilisation_ratio', 'infer_gpu_utilization_ratio'],
                    scrape, set(), {"infer_gpu_utilization_ratio"}),
            ['infer_gpu_utilisation_ratio', 'infer_rejection_total',
             'infer_rejections_total{reason="queue_ful"}'])


class MonitoringQueriesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="infer_monitoring_")
        os.makedirs(os.path.join(cls.work.name, "repo", "pool"))
        with open(os.path.join(cls.work.name, "repo", "pool", "config.pbtxt"), "w") as f:
            f.write(CONFIG)
        cls.server = InferServer(os.path.join(cls.work.name, "repo"))
        try:
            with grpcclient.InferenceServerClient(cls.server.address) as client:
                for length in (5, 12, 40, 64):  # both length classes
                    ids = np.full((2, length), 7, dtype=np.int64)
                    inp = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
                    inp.set_data_from_numpy(ids)
                    client.infer("pool", [inp])
            url = f"http://127.0.0.1:{cls.server.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
        finally:
            cls.server.stop()
        cls.samples = [s for family in text_string_to_metric_families(text)
                       for s in family.samples]
        cls.scrape = {}  # sample name -> the label sets it has
        for s in cls.samples:
            cls.scrape.setdefault(s.name, []).append(s.labels)
        with open(DASHBOARD) as f:
            cls.dashboard = dashboard_queries(json.load(f))
        cls.rule_exprs, cls.recorded, cls.slo_targets = rule_queries()

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def test_the_scrape_has_the_requests(self):
        counts = {s.labels["length_bucket"]: s.value for s in self.samples
                  if s.name == "infer_request_duration_seconds_count"
                  and s.labels["model"] == "pool"}
        self.assertEqual(counts, {"16": 2, "64": 2})
        self.assertNotIn("infer_gpu_utilization_ratio", self.scrape)  # the CPU: no NVML

    def test_every_dashboard_metric_exists(self):
        names = {n for e in self.dashboard for n, _ in selectors(e)}
        # Latency, batching, refusals, memory and GPU panels, and the
        # variables: a dashboard that lost its panels must not pass.
        self.assertGreaterEqual(len(names), 40, sorted(names))
        self.assertEqual(missing(self.dashboard, self.scrape, self.recorded,
                                 gpu_metric_names()), [])

    def test_every_rule_metric_exists(self):
        names = {n for e in self.rule_exprs for n, _ in selectors(e)}
        self.assertGreaterEqual(len(names), 12, sorted(names))
        self.assertEqual(missing(self.rule_exprs, self.scrape, self.recorded,
                                 gpu_metric_names()), [])

    def test_every_gpu_metric_queried_is_one_the_server_writes(self):
        gpu = gpu_metric_names()
        self.assertIn("infer_gpu_utilization_ratio", gpu)  # the source was read
        queried = {n for e in self.dashboard + self.rule_exprs for n, _ in selectors(e)
                   if n.startswith("infer_gpu_")}
        self.assertTrue(queried)
        self.assertLessEqual(queried, gpu)

    def test_slo_targets_name_latency_buckets(self):
        bounds = {s["le"] for s in self.scrape["infer_request_duration_seconds_bucket"]}
        self.assertTrue(self.slo_targets)
        for target in self.slo_targets:
            self.assertIn(target["le"], bounds, target)
            self.assertIn("model", target)

    def test_dashboard_uses_its_variables(self):
        # Importable anywhere: every panel queries the chosen data source,
        # and the panels that take a model follow the `model` variable.
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        self.assertEqual((variables["datasource"]["type"], variables["datasource"]["query"]),
                         ("datasource", "prometheus"))
        self.assertIn("infer_model_info", variables["model"]["definition"])
        panels = [p for p in dashboard["panels"] if p["type"] != "row"]
        self.assertEqual(len({p["id"] for p in dashboard["panels"]}), len(dashboard["panels"]))
        for p in panels:
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"},
                             p["title"])
            for t in p["targets"]:
                if "{{model}}" in t["legendFormat"]:
                    self.assertIn('model=~"$model"', t["expr"], p["title"])

    def test_dashboard_expressions_parse(self):
        # Grafana's variables replaced by what they expand to, then every
        # expression as a recording rule for promtool to parse.
        rules = []
        for i, expr in enumerate(self.dashboard):
            expr = expr.replace("$__rate_interval", "1m").replace("$model", ".*")
            rules.append({"record": f"dashboard_query_{i}",
                          "expr": expr.replace("$instance", ".*")})
        path = os.path.join(self.work.name, "dashboard-queries.yml")
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        promtool = os.path.join(os.environ["INFER_PROMETHEUS_DIR"], "promtool")
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
