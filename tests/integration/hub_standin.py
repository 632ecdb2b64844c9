"""A stand-in for the Hugging Face Hub on loopback, answering as the hub does
for what huggingface_hub and `infer-server --model-id` ask of it:

  GET  /api/models/{repo}/revision/{revision}    {"id", "sha", "siblings", ...}
  GET  /api/models/{repo}/tree/{revision}?recursive=...
       the files (type, path, size, oid, lfs {oid, size, pointerSize}), in
       pages of `page_size` entries linked by `Link: <...>; rel="next"`
  HEAD/GET /{repo}/resolve/{revision}/{path}
       a small file: 200 with ETag (git's blob id), X-Repo-Commit and the
       bytes; an LFS file (*.safetensors): 302 to its storage URL on
       another host name (http://localhost:PORT/cdn/...) with X-Linked-Etag
       (its SHA-256), X-Linked-Size and X-Repo-Commit
  GET  /cdn/{sha256}   the bytes, with Range (206 and Content-Range)

and its refusals: 401 with X-Error-Code RepoNotFound for an unknown or
private repository without a valid token, 401 "Invalid credentials in
Authorization header" for a token it does not know, 404 RevisionNotFound,
403 GatedRepo for a gated repository's files without an accepted token.

Faults on request, for the tests: cut a storage transfer after some bytes
(once), corrupt a file's bytes, send more bytes than the file has, or slow a
transfer down. Every request is
recorded (method, path, Authorization, Range).
"""

import hashlib
import http.server
import json
import threading
import time
import urllib.parse


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id, files, commit, private=False, gated=False, lfs=None):
        self.repo_id = repo_id
        self.files = dict(files)  # path -> bytes
        self.commit = commit
        self.refs = {"main": commit}
        self.private = private
        self.gated = gated
        is_lfs = lfs or (lambda path: path.endswith(".safetensors"))
        self.lfs = {p for p in self.files if is_lfs(p)}

    def entry(self, path):
        data = self.files[path]
        e = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
        if path in self.lfs:
            pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:"
                       f"{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n").encode()
            e["oid"] = git_blob_id(pointer)
            e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                        "pointerSize": len(pointer)}
        return e


class HubStandIn:
    def __init__(self, tokens=(), page_size=4):
        self.repos = {}
        self.tokens = set(tokens)
        self.page_size = page_size
        self.requests = []
        self.cut_once = {}   # sha256 -> bytes sent before the connection is cut
        self.corrupt = set()  # sha256 of files whose bytes are served altered
        self.slow = {}       # sha256 -> seconds between 64 kB chunks
        self.extra = {}      # sha256 -> bytes of garbage sent after the file's
        self.lock = threading.Lock()
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                standin._serve(self, head=False)

            def do_HEAD(self):
                standin._serve(self, head=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def add(self, repo):
        self.repos[repo.repo_id] = repo
        return repo

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def storage_gets(self, sha256):
        """The requests for one file's bytes at the storage URL."""
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(f"/cdn/{sha256}")]

    # --- answering -------------------------------------------------------

    def _serve(self, h, head):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        auth = h.headers.get("Authorization")
        with self.lock:
            self.requests.append({"method": h.command, "path": path, "auth": auth,
                                  "range": h.headers.get("Range"), "host": h.headers.get("Host")})
        if path.startswith("/cdn/"):
            return self._storage(h, path[len("/cdn/"):], head)
        token_ok = None
        if auth is not None:
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            if token not in self.tokens:
                return self._error(h, 401, None, "Invalid credentials in Authorization header")
            token_ok = token
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/"):]
            for kind in ("/revision/", "/tree/"):
                if kind in rest:
                    repo_id, revision = rest.split(kind, 1)
                    repo = self._repo(h, repo_id, token_ok)
                    if repo is None:
                        return None
                    commit = self._commit(h, repo, revision)
                    if commit is None:
                        return None
                    if kind == "/revision/":
                        return self._json(h, {
                            "id": repo.repo_id, "modelId": repo.repo_id, "sha": commit,
                            "private": repo.private, "gated": "manual" if repo.gated else False,
                            "siblings": [{"rfilename": p} for p in sorted(repo.files)]})
                    return self._tree(h, repo, commit, urllib.parse.parse_qs(url.query))
            return self._error(h, 404, None, "Not Found")
        if "/resolve/" in path:
            repo_id, rest = path[1:].split("/resolve/", 1)
            repo = self._repo(h, repo_id, token_ok)
            if repo is None:
                return None
            revision, _, file_path = rest.partition("/")
            commit = self._commit(h, repo, revision)
            if commit is None:
                return None
            if repo.gated and token_ok is None:
                return self._error(h, 403, "GatedRepo",
                                   f"Access to model {repo.repo_id} is restricted and you are "
                                   "not in the authorized list.")
            if file_path not in repo.files:
                return self._error(h, 404, "EntryNotFound", "Entry not found")
            return self._resolve(h, repo, commit, file_path, head)
        return self._error(h, 404, None, "Not Found")

    def _repo(self, h, repo_id, token):
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and token is None):
            # The hub does not tell an unknown repository from a private one.
            self._error(h, 401 if token is None else 404, "RepoNotFound", "Repository not found")
            return None
        return repo

    def _commit(self, h, repo, revision):
        if revision == repo.commit:
            return revision
        if revision in repo.refs:
            return repo.refs[revision]
        self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return None

    def _tree(self, h, repo, commit, query):
        entries = []
        dirs = set()
        for p in sorted(repo.files):
            parts = p.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": d})
            entries.append(repo.entry(p))
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start:start + self.page_size]
        headers = {}
        if start + self.page_size < len(entries):
            nxt = (f"{self.endpoint}/api/models/{repo.repo_id}/tree/{commit}"
                   f"?recursive=true&expand=false&cursor={start + self.page_size}")
            headers["Link"] = f'<{nxt}>; rel="next"'
        return self._json(h, page, headers)

    def _resolve(self, h, repo, commit, file_path, head):
        data = repo.files[file_path]
        entry = repo.entry(file_path)
        if file_path in repo.lfs:
            sha = entry["lfs"]["oid"]
            h.send_response(302)
            # Another host name than the endpoint's, as the hub's storage is:
            # a client must not send the token there.
            h.send_header("Location", f"http://localhost:{self.port}/cdn/{sha}?signature=x")
            h.send_header("X-Repo-Commit", commit)
            h.send_header("ETag", f'"{entry["oid"]}"')
            h.send_header("X-Linked-Etag", f'"{sha}"')
            h.send_header("X-Linked-Size", str(len(data)))
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        h.send_response(200)
        h.send_header("X-Repo-Commit", commit)
        h.send_header("ETag", f'"{entry["oid"]}"')
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not head:
            h.wfile.write(data)
        return None

    def _storage(self, h, sha, head):
        data = None
        for repo in self.repos.values():
            for p in repo.lfs:
                if hashlib.sha256(repo.files[p]).hexdigest() == sha:
                    data = repo.files[p]
        if data is None:
            return self._error(h, 404, None, "Not Found")
        if sha in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        rng = h.headers.get("Range")
        if rng:
            first = rng.split("=", 1)[1].split("-", 1)[0]
            start = int(first)
            if start >= len(data):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return None
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            h.send_response(200)
        body = data[start:] + b"\0" * self.extra.get(sha, 0)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes")
        h.end_headers()
        if head:
            return None
        with self.lock:
            cut = self.cut_once.pop(sha, None)
        if cut is not None:
            h.wfile.write(body[:cut])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
            return None
        delay = self.slow.get(sha)
        for i in range(0, len(body), 65536):
            h.wfile.write(body[i:i + 65536])
            if delay:
                h.wfile.flush()
                time.sleep(delay)
        return None

    def _json(self, h, value, headers=None):
        body = json.dumps(value).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def _error(self, h, status, code, message):
        body = json.dumps({"error": message}).encode()
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
