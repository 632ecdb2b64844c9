#!/usr/bin/env python3
"""What the server itself costs per request, counted rather than timed: the
user-space instructions (valgrind's callgrind) and heap allocations
(valgrind's memcheck) of infer-server serving the `identity` model, against
echo-server (the bare gRPC server of bench/frontend_overhead.py), for the
same closed-loop load from infer-bench. Counts do not move with what else
runs on the machine, so they resolve changes of a few percent that
frontend_overhead.py's throughput ratio cannot.

Each server is started under valgrind twice: once sent one request, once
--requests requests; the difference, divided by the requests, is the cost
per request without start-up and shutdown. Under valgrind the servers run
some 50 times slower, one thread at a time. At concurrency 1 every request
is a batch of its own and the count repeats within 0.1% from run to run;
at higher concurrency it depends on how the batches happened to form
(infer-server at 16: 68.9k three times and 74.1k once).

  python3 bench/frontend_instructions.py [--requests 5000] [--concurrency 1]
                                         [--length 128] [--baseline-binary OLD/infer-server]
                                         [--allocations]

Needs valgrind (apt-get install valgrind; not among the installed
dependencies). --allocations adds memcheck's heap totals (3,000 requests:
memcheck is slower still). --baseline-binary adds another infer-server build,
e.g. the previous commit's.
"""

import argparse
import os
import re
import shutil
import tempfile

import benchlib

from frontend_overhead import IDENTITY


def run(argv, marker, tool, requests, a, workdir):
    """`argv` under valgrind's `tool`, sent `requests` requests; returns the
    tool's total: instructions (callgrind) or heap allocations (memcheck)."""
    out = os.path.join(workdir, "callgrind.out")
    prefix = (["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
              if tool == "callgrind" else ["valgrind", "--tool=memcheck", "--leak-check=no"])
    log = os.path.join(workdir, f"{tool}.log")
    server = benchlib.Process(prefix + argv, marker, log)
    try:
        benchlib.infer_bench(server.address, "identity", "--concurrency", a.concurrency,
                             "--lengths", a.length, "--warmup-s", 0, "--requests", requests)
    finally:
        code = server.stop()
    text = open(log).read()
    if code != 0:
        raise RuntimeError(f"{argv[0]} exited {code} under valgrind:\n{text[-2000:]}")
    pattern = r"Collected : (\d+)" if tool == "callgrind" else r"total heap usage: ([\d,]+) allocs"
    m = re.search(pattern, text)
    if m is None:
        raise RuntimeError(f"no {tool} total in the log of {argv[0]}:\n{text[-2000:]}")
    return int(m.group(1).replace(",", ""))


def per_request(argv, marker, tool, requests, a, workdir):
    one = run(argv, marker, tool, 1, a, workdir)
    many = run(argv, marker, tool, requests + 1, a, workdir)
    return (many - one) / requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--length", type=int, default=128, help="tokens per request (INT64 ids)")
    ap.add_argument("--baseline-binary", help="another infer-server build to count alongside")
    ap.add_argument("--allocations", action="store_true",
                    help="also count heap allocations (memcheck, 3,000 requests)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found: apt-get install valgrind")
    print(f"front-end instructions on {benchlib.machine()}")
    print(f"payload: INT64 [1, {a.length}] in and out; {a.requests} requests at concurrency "
          f"{a.concurrency}, less a run of 1")
    repo = benchlib.write_repository({"identity": IDENTITY})
    workdir = tempfile.mkdtemp(prefix="frontend_instructions_")
    servers = {"infer-server": os.path.join(benchlib.BIN, "infer-server")}
    if a.baseline_binary:
        servers["baseline"] = a.baseline_binary
    commands = {
        name: ([binary, "--device", "cpu", "--grpc-address", "127.0.0.1:0", "--metrics-address",
                "", "--http-address", "", "--log-summary-interval-s", "0", "--drain-grace-s", "0",
                "--model-repository", repo], "infer-server listening")
        for name, binary in servers.items()}
    commands["echo-server"] = ([os.path.join(benchlib.BIN, "echo-server"), "--grpc-address",
                                "127.0.0.1:0"], "echo-server listening")
    rows = []
    try:
        for name, (argv, marker) in commands.items():
            instructions = per_request(argv, marker, "callgrind", a.requests, a, workdir)
            allocations = (per_request(argv, marker, "memcheck", 3000, a, workdir)
                           if a.allocations else None)
            rows.append([name, f"{instructions:,.0f}",
                         "" if allocations is None else f"{allocations:.1f}"])
    finally:
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    benchlib.table(["server", "instructions / request", "heap allocations / request"], rows)


if __name__ == "__main__":
    main()
