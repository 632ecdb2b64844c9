"""Starts infer-server (INFER_SERVER_BINARY) on free loopback ports for the
Python integration tests, and stops it; finds the other programs they run."""

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading


def fixed_port():
    """A free loopback port for a process started later to bind by number.

    Taken below the kernel's ephemeral range (ip_local_port_range), where no
    bind to port 0 is ever handed a port: a port picked by binding to 0 and
    closing could be handed by the next bind to 0 (say an infer-server's
    metrics listener) before the process meant for it starts."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    low = max(low, 2048)
    for _ in range(200):
        port = random.randrange(max(1024, low - 16384), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port below {low}")


def find_binary(env, *candidates):
    for c in (os.environ.get(env), *candidates):
        if c and shutil.which(c):
            return shutil.which(c)
    raise RuntimeError(f"{env}: none of {candidates} found; scripts/test.sh installs it")


class InferServer:
    """infer-server on the CPU with `repo` (None: none, the models come in
    `extra_args`), gRPC and metrics on free ports; `env`: its environment
    (default: this process's)."""

    def __init__(self, repo, *extra_args, env=None):
        self.proc = subprocess.Popen(
            [os.environ["INFER_SERVER_BINARY"], "--device", "cpu", "--grpc-address",
             "127.0.0.1:0", "--metrics-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
             "--drain-grace-s", "0",
             *(["--model-repository", repo] if repo is not None else []),
             *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.log = []
        self.grpc_port = self.metrics_port = self.http_port = None
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"metrics at https?://127\.0\.0\.1:(\d+)/metrics", line)
            if m:
                self.metrics_port = int(m.group(1))
            # Logged before the gRPC line, like the metrics line.
            m = re.search(r"\) on https?://(?:127\.0\.0\.1|\[[0-9a-f:]+\]|[\w.-]+):(\d+)", line)
            if m:
                self.http_port = int(m.group(1))
            m = re.search(r"infer-server listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.grpc_port = int(m.group(1))
                break
        if self.grpc_port is None or self.metrics_port is None:
            raise RuntimeError("infer-server did not start:\n" + "".join(self.log))
        # Keep draining the server's output so it never blocks on a full pipe.
        threading.Thread(target=lambda: self.log.extend(self.proc.stdout), daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.grpc_port}"

    def stop(self):
        """SIGTERM; raises unless the server drains and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        if code != 0:
            raise AssertionError(f"infer-server exited {code}:\n" + "".join(self.log))
