#!/usr/bin/env python3
"""Writes the configuration of one node that runs one infer-server per GPU
behind a local load balancer: an environment file per instance for the
systemd template unit infer-server@.service, an Envoy configuration and an
nginx configuration for the instances. Standard library only.

Instance i serves GPU i (--device cuda:i) with gRPC on base-port + i and
metrics on metrics-base-port + i and HTTP (KServe REST, OpenAI embeddings) on
http-base-port + i. The load balancer listens on --listen and
spreads calls over the instances:
- Envoy: gRPC health checks (grpc.health.v1) every --health-interval-ms, so
  an instance that starts draining (NOT_SERVING for --drain-grace-s) leaves
  the rotation before it stops accepting; least-request balancing; outlier
  detection; retries on UNAVAILABLE, reset and connect failure (--no-retries
  leaves them out, as the rolling-restart test does to show they are not
  needed).
- nginx: grpc_pass with grpc_next_upstream (open-source nginx has no active
  health checks: a draining instance still serves until it sends GOAWAY, then
  its refused connections send nginx to the next one), client_max_body_size
  above the server's message limit, read timeouts suited to streams.

Usage:
  deploy/gen-node-config.py --out /etc/infer-server          # one per GPU found
  deploy/gen-node-config.py --instances 3 --out /tmp/node    # any count
Then, for systemd: copy deploy/systemd/infer-server@.service to
/etc/systemd/system/ and `systemctl enable --now infer-server@0 ...` (the
commands are printed), and run Envoy or nginx with the file written.
"""

import argparse
import os
import subprocess
import sys


def count_gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def host_port(text, what):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        sys.exit(f"gen-node-config: {what} must be host:port, got '{text}'")
    return host, int(port)


def envoy_config(a, backends):
    listen_host, listen_port = host_port(a.listen, "--listen")
    endpoints = "\n".join(f"""              - endpoint:
                  address:
                    socket_address: {{ address: {h}, port_value: {p} }}""" for h, p in backends)
    retry = "" if a.no_retries else """
                            retry_policy:
                              retry_on: unavailable,reset,connect-failure,refused-stream
                              num_retries: 2
                              # A retry goes to another instance: least request
                              # would otherwise favour the idle, dead one again.
                              retry_host_predicate:
                                - name: envoy.retry_host_predicates.previous_hosts
                                  typed_config:
                                    "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate
                              host_selection_retry_max_attempts: 3"""
    interval = f"{a.health_interval_ms / 1000:g}s"
    return f"""# Envoy in front of {len(backends)} infer-server instances (gen-node-config.py).
admin:
  address:
    socket_address: {{ address: 127.0.0.1, port_value: {a.admin_port} }}
static_resources:
  listeners:
    - name: grpc
      address:
        socket_address: {{ address: {listen_host}, port_value: {listen_port} }}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: grpc
                codec_type: HTTP2
                # Long enough for ModelStreamInfer streams.
                stream_idle_timeout: 300s
                route_config:
                  virtual_hosts:
                    - name: infer
                      domains: ["*"]
                      routes:
                        - match: {{ prefix: "/" }}
                          route:
                            cluster: infer
                            timeout: 0s  # the client's grpc-timeout applies{retry}
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
    - name: infer
      type: STATIC
      lb_policy: LEAST_REQUEST
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config:
            http2_protocol_options:
              max_concurrent_streams: 1024
      # An instance that says NOT_SERVING (draining, or its GPU lost) leaves
      # the rotation within one interval; one that comes back SERVING rejoins.
      health_checks:
        - timeout: 1s
          interval: {interval}
          no_traffic_interval: {interval}
          unhealthy_threshold: 1
          healthy_threshold: 1
          grpc_health_check: {{}}
      # Retries in flight at once may reach half the requests in flight (at
      # least 32): enough to move every call of one lost instance of two or
      # more, yet bounded against a retry storm. Envoy's default allows 3,
      # so a killed instance failed the calls it held beyond those 3.
      circuit_breakers:
        thresholds:
          - priority: DEFAULT
            retry_budget:
              budget_percent: {{ value: 50.0 }}
              min_retry_concurrency: 32
      # Ejects an instance that keeps failing (e.g. killed) between checks.
      outlier_detection:
        consecutive_5xx: 5
        consecutive_gateway_failure: 3
        interval: 1s
        base_ejection_time: 5s
        max_ejection_percent: 50
      load_assignment:
        cluster_name: infer
        endpoints:
          - lb_endpoints:
{endpoints}
"""


def nginx_config(a, backends):
    listen_host, listen_port = host_port(a.listen, "--listen")
    servers = "\n".join(f"        server {h}:{p} max_fails=1 fail_timeout=2s;" for h, p in backends)
    pid = os.path.join(os.path.abspath(a.out), "nginx.pid")
    return f"""# nginx in front of {len(backends)} infer-server instances (gen-node-config.py).
worker_processes auto;
pid {pid};
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    upstream infer {{
        least_conn;
{servers}
        keepalive 64;
    }}
    server {{
        listen {listen_host}:{listen_port} http2;
        # Above infer-server's --max-receive-message-bytes (64 MiB by default).
        client_max_body_size 80m;
        # Streams (ModelStreamInfer) may stay open and idle for minutes.
        grpc_read_timeout 300s;
        grpc_send_timeout 300s;
        client_body_timeout 300s;
        location / {{
            grpc_pass grpc://infer;
            # A refused connection (an instance restarting), a stream the
            # instance refused or left unprocessed by its GOAWAY
            # (invalid_header: nginx's word for both) or a gateway error goes
            # to the next instance.
            # Inference calls may be sent again (non_idempotent): they change
            # nothing on the server. (A gRPC status travels in trailers after
            # HTTP 200, so nginx cannot retry on UNAVAILABLE itself.)
            grpc_next_upstream error timeout invalid_header http_502 http_503 http_504 non_idempotent;
            grpc_next_upstream_tries 3;
        }}
    }}
}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=0,
                    help="instances to configure (default: one per GPU nvidia-smi lists)")
    ap.add_argument("--out", required=True, help="folder to write the files into")
    ap.add_argument("--listen", default="0.0.0.0:8001", help="the load balancer's host:port")
    ap.add_argument("--backend-host", default="127.0.0.1")
    ap.add_argument("--base-port", type=int, default=8101, help="gRPC port of instance 0")
    ap.add_argument("--ports", default="",
                    help="the instances' gRPC ports, comma-separated, instead of base-port + i "
                         "(their count sets --instances)")
    ap.add_argument("--metrics-base-port", type=int, default=8201,
                    help="metrics port of instance 0")
    ap.add_argument("--http-base-port", type=int, default=8301,
                    help="HTTP port of instance 0 (KServe v2 REST, OpenAI /v1/embeddings)")
    ap.add_argument("--admin-port", type=int, default=9901, help="Envoy's admin port (loopback)")
    ap.add_argument("--health-interval-ms", type=int, default=500)
    ap.add_argument("--no-retries", action="store_true", help="Envoy without a retry policy")
    a = ap.parse_args()
    ports = [int(p) for p in a.ports.split(",")] if a.ports else []
    n = len(ports) or a.instances or count_gpus()
    if n < 1:
        sys.exit("gen-node-config: no GPU found (nvidia-smi -L); give --instances N")
    ports = ports or [a.base_port + i for i in range(n)]
    os.makedirs(a.out, exist_ok=True)
    backends = [(a.backend_host, p) for p in ports]
    for i in range(n):
        with open(os.path.join(a.out, f"instance-{i}.env"), "w") as f:
            f.write(f"# infer-server@{i}.service: GPU {i}\n"
                    f"GRPC_ADDRESS={a.backend_host}:{ports[i]}\n"
                    f"METRICS_ADDRESS={a.backend_host}:{a.metrics_base_port + i}\n"
                    f"HTTP_ADDRESS={a.backend_host}:{a.http_base_port + i}\n")
    toml = os.path.join(a.out, "server.toml")
    if not os.path.exists(toml):  # the unit passes --config; keep an operator's file
        with open(toml, "w") as f:
            f.write("# Options shared by every instance, by their long names, e.g.\n"
                    "# model-repository = \"/srv/models\"\n")
    with open(os.path.join(a.out, "envoy.yaml"), "w") as f:
        f.write(envoy_config(a, backends))
    with open(os.path.join(a.out, "nginx.conf"), "w") as f:
        f.write(nginx_config(a, backends))
    print(f"wrote {n} instance files, server.toml, envoy.yaml and nginx.conf to {a.out}")
    print("systemd: " + " ".join(f"infer-server@{i}" for i in range(n)) +
          " (systemctl enable --now ...; the unit reads /etc/infer-server/instance-%i.env)")


if __name__ == "__main__":
    main()
