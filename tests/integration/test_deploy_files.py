"""The deploy/ files and the Dockerfile, checked against the server they run.

What cannot run here (systemd, a cluster, a Docker engine) is cross-checked:
every flag against `infer-server --help`, ports, probes, grace periods,
selectors, the HPA's metric, and the image's CUDA version against the
binary's. What can run here does: the proxies' own validators (`envoy --mode
validate`, `nginx -t`) and hadolint on the Dockerfile.

Run by CTest; needs INFER_SERVER_BINARY, envoy and hadolint (.venv, or
ENVOY_BINARY / HADOLINT_BINARY) and nginx (PATH, or NGINX_BINARY), which
scripts/test.sh installs.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from infer_server_process import find_binary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GEN = os.path.join(ROOT, "deploy", "gen-node-config.py")
VENV_BIN = os.path.dirname(sys.executable)


def dockerfile_instructions(text):
    """(INSTRUCTION, arguments) per instruction, continuation lines joined
    and comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip():
            word, _, rest = current.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        current = ""
    return out


class DeployFilesTest(unittest.TestCase):
    """See the module's docstring."""

    def test_the_unit_passes_only_options_the_server_has(self):
        unit = os.path.join(ROOT, "deploy", "systemd", "infer-server@.service")
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
        root = os.path.join(ROOT, "deploy")
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
        envoy = find_binary("ENVOY_BINARY", os.path.join(VENV_BIN, "envoy"), "envoy")
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
                    text = f.read()
                    self.assertIn(f"GRPC_ADDRESS=127.0.0.1:{8101 + i}", text)
                    # Each instance its own HTTP port: the default 8000 would clash.
                    self.assertIn(f"HTTP_ADDRESS=127.0.0.1:{8301 + i}", text)

    def test_the_dockerfile_passes_hadolint_and_agrees_with_the_server(self):
        hadolint = find_binary("HADOLINT_BINARY", os.path.join(VENV_BIN, "hadolint"), "hadolint")
        path = os.path.join(ROOT, "Dockerfile")
        r = subprocess.run([hadolint, path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(path) as f:
            ins = dockerfile_instructions(f.read())
        args = {}
        for word, rest in ins:
            if word == "ARG" and "=" in rest:
                k, v = rest.split("=", 1)
                args.setdefault(k, v)
        froms = [rest for word, rest in ins if word == "FROM"]
        self.assertEqual(len(froms), 2, "a build stage and a run stage")
        # The run stage is NVIDIA's CUDA runtime image, on the CUDA version
        # the build stage compiles with.
        image = froms[-1].replace("${CUDA_IMAGE}", args["CUDA_IMAGE"])
        m = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-runtime-ubuntu[\d.]+", image)
        self.assertIsNotNone(m, image)
        self.assertEqual(args["CUDA_MAJOR_MINOR"], f"{m.group(1)}.{m.group(2)}")
        self.assertEqual(args["CUDA_PACKAGE_VERSION"], f"{m.group(1)}-{m.group(2)}")
        # When this build has the CUDA backend, it links the image's major.
        binary = os.environ["INFER_SERVER_BINARY"]
        needed = subprocess.run(["readelf", "-d", binary], capture_output=True,
                                text=True).stdout
        cudart = re.search(r"libcudart\.so\.(\d+)", needed)
        if cudart:
            self.assertEqual(cudart.group(1), m.group(1), "the image's CUDA is another major")
        # The command line: the server, flags it has, the ports it exposes,
        # and the same arguments as the Kubernetes Deployment.
        # The entry point reads the container's config file, then the
        # arguments (TEI's: `docker run IMAGE --model-id ORG/NAME`).
        entry = json.loads(next(rest for word, rest in ins if word == "ENTRYPOINT"))
        self.assertEqual(entry, ["/opt/infer-server/bin/infer-server",
                                 "--config=/opt/infer-server/container.toml"])
        config_path = os.path.join(ROOT, "deploy", "docker", "container.toml")
        self.assertIn("/src/deploy/docker/container.toml /opt/infer-server/container.toml",
                      " ".join(rest for word, rest in ins if word == "COPY"))
        import tomllib  # Python 3.11
        with open(config_path, "rb") as f:
            config = tomllib.load(f)
        cmd = json.loads(next(rest for word, rest in ins if word == "CMD"))
        flags = self.server_flags()
        for a in cmd + [f"--{k}" for k in config]:
            self.assertIn(a.split("=", 1)[0], flags, f"{a} is not an infer-server option")
        # The server takes the file: --version runs after the config is read.
        r = subprocess.run([os.environ["INFER_SERVER_BINARY"], f"--config={config_path}",
                            "--model-id", "org/name", "--version"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        values = dict(a[2:].split("=", 1) for a in cmd)
        exposed = {int(p) for word, rest in ins if word == "EXPOSE" for p in rest.split()}
        self.assertEqual(config["hostname"], "0.0.0.0")
        self.assertEqual(exposed, {int(values["grpc-address"].rsplit(":", 1)[1]),
                                   int(config["grpc-address"].rsplit(":", 1)[1]),
                                   int(values["metrics-address"].rsplit(":", 1)[1]),
                                   8000})  # HTTP: hostname's port, the server's default
        self.assertIn("HUGGINGFACE_HUB_CACHE=/data",
                      " ".join(rest for word, rest in ins if word == "ENV"))
        self.assertEqual(next(rest for word, rest in ins if word == "STOPSIGNAL"), "SIGTERM")
        import yaml  # .venv (scripts/setup-venv.sh)
        with open(os.path.join(ROOT, "deploy", "kubernetes", "infer-server.yaml")) as f:
            deployment = next(d for d in yaml.safe_load_all(f) if d["kind"] == "Deployment")
        self.assertEqual(deployment["spec"]["template"]["spec"]["containers"][0]["args"], cmd)
        # What the image's build stage copies in is what the repository has.
        with open(os.path.join(ROOT, ".dockerignore")) as f:
            ignored = [l.strip().rstrip("/") for l in f if l.strip() and not l.startswith("#")]
        for needed_path in ("scripts", "server", "CMakeLists.txt"):
            self.assertNotIn(needed_path, ignored)


if __name__ == "__main__":
    unittest.main()
