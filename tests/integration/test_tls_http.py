"""TLS on the HTTP and metrics ports, with the certificate options gRPC
takes (--tls-cert-file, --tls-key-file, --tls-client-ca-file), against
certificates this test makes with openssl: a CA, a server certificate for
127.0.0.1, a client certificate, and a self-signed stranger.

- TLS: HTTPS answers a client that trusts the CA (urllib, and OpenAI's
  client through httpx), on the HTTP port and the metrics port; plaintext
  HTTP, a client that does not trust the CA, and TLS 1.1 are refused.
- Mutual TLS: only a client with a certificate the CA signed is served.
- --http-tls=false keeps HTTP and metrics plaintext while gRPC keeps TLS.

Run by CTest; needs INFER_SERVER_BINARY (the path of build/bin/infer-server).
"""

import http.client
import os
import shutil
import ssl
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import httpx
import openai

from infer_server_process import InferServer

HERE = os.path.dirname(os.path.abspath(__file__))
BERT = os.path.join(HERE, "..", "fixtures", "families", "bert")


def make_certificates(d):
    key = "-newkey rsa:2048 -nodes"
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    script = f"""set -e
openssl req -x509 {key} -keyout ca.key -out ca.pem -days 2 -subj /CN=infer-test-ca
openssl req {key} -keyout server.key -out server.csr -subj /CN=127.0.0.1
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile server.ext -out server.pem
openssl req {key} -keyout client.key -out client.csr -subj /CN=client
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile client.ext -out client.pem
openssl req -x509 {key} -keyout other.key -out other.pem -days 2 -subj /CN=stranger
"""
    subprocess.run(["bash", "-c", script], cwd=d, check=True, capture_output=True)


class TlsHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tls-http-")
        make_certificates(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def context(self, ca="ca.pem", cert=None):
        ctx = ssl.create_default_context(cafile=self.path(ca))
        if cert is not None:
            ctx.load_cert_chain(self.path(f"{cert}.pem"), self.path(f"{cert}.key"))
        return ctx

    def get(self, port, path, ctx):
        """(status, body); a failed connection raises its cause (ssl.SSLError,
        a reset), not urllib's wrapper."""
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx,
                                        timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.URLError as e:
            if isinstance(e.reason, Exception):
                raise e.reason from e
            raise

    def serve(self, *extra):
        return InferServer(None, "--model", f"tiny={BERT}", "--tls-cert-file",
                           self.path("server.pem"), "--tls-key-file", self.path("server.key"),
                           *extra)

    def test_https_on_the_http_and_metrics_ports(self):
        server = self.serve()
        try:
            log = "".join(server.log)
            self.assertIn(f"on https://127.0.0.1:{server.http_port}", log)
            self.assertIn(f"metrics at https://127.0.0.1:{server.metrics_port}/metrics", log)
            ctx = self.context()
            self.assertEqual(self.get(server.http_port, "/health", ctx)[0], 200)
            status, text = self.get(server.metrics_port, "/metrics", ctx)
            self.assertEqual(status, 200)
            self.assertIn("infer_server_ready 1", text)
            # OpenAI's client, over httpx trusting the test CA.
            client = openai.OpenAI(base_url=f"https://127.0.0.1:{server.http_port}/v1",
                                   api_key="unused",
                                   http_client=httpx.Client(verify=self.path("ca.pem")))
            r = client.embeddings.create(model="tiny", input=["A man is playing a guitar."])
            self.assertEqual(len(r.data[0].embedding), 64)
            # Plaintext to the TLS port: no HTTP answer.
            conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
            with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
                conn.request("GET", "/health")
                conn.getresponse()
            conn.close()
            # A client that does not trust the CA, and TLS 1.1.
            with self.assertRaises(ssl.SSLCertVerificationError):
                self.get(server.http_port, "/health", self.context(ca="other.pem"))
            old = self.context()
            old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            old.maximum_version = ssl.TLSVersion.TLSv1_1
            with self.assertRaises((ssl.SSLError, ConnectionError)):
                self.get(server.http_port, "/health", old)
            # The server still serves after the failed handshakes.
            self.assertEqual(self.get(server.http_port, "/health", ctx)[0], 200)
        finally:
            server.stop()

    def test_mutual_tls(self):
        server = self.serve("--tls-client-ca-file", self.path("ca.pem"))
        try:
            self.assertIn("(mutual TLS)", "".join(server.log))
            for port in (server.http_port, server.metrics_port):
                path = "/metrics" if port == server.metrics_port else "/health"
                self.assertEqual(self.get(port, path, self.context(cert="client"))[0], 200)
                for who in (None, "other"):  # no certificate, or one the CA did not sign
                    with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                        self.get(port, path, self.context(cert=who))
        finally:
            server.stop()

    def test_http_tls_false_keeps_http_plaintext(self):
        server = self.serve("--http-tls=false")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/health",
                                        timeout=30) as r:
                self.assertEqual(r.status, 200)
            self.assertIn("(TLS)", "".join(server.log))  # gRPC
        finally:
            server.stop()

    def test_bad_files_stop_start_up(self):
        p = subprocess.run([os.environ["INFER_SERVER_BINARY"], "--device", "cpu",
                            "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                            "--metrics-address", "127.0.0.1:0", "--tls-cert-file",
                            self.path("server.pem"), "--tls-key-file", self.path("other.key")],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        # Refused before any model is loaded, naming the file.
        self.assertIn("cannot use the TLS private key", p.stdout)
        self.assertIn("other.key", p.stdout)
        self.assertNotIn("ready", p.stdout)


if __name__ == "__main__":
    unittest.main()
