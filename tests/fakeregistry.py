"""A stand-in for registry.ollama.ai on loopback: real sockets, the behaviours a plain registry cannot show.

It serves manifests and blobs as the Docker registry v2 API does, and on request: sends blobs to
a CDN on another port (307, as the public registry sends them to Cloudflare), asks for a bearer
token (401 with a ``WWW-Authenticate: Bearer`` challenge, token from ``/token``), cuts a blob
transfer after some bytes, or serves bytes that are not the blob the digest names.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from cllm_ollama.store.keys import public_key

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"
TOKEN = "t0ken-for-anonymous"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def statuses(events: list[dict[str, Any]]) -> list[str]:
    """The statuses of a pull's or push's progress events, each run of one layer's progress as one entry."""
    out: list[str] = []
    for event in events:
        if not out or out[-1] != event["status"]:
            out.append(event["status"])
    return out


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    server: str  # "registry" or "cdn"


@dataclass
class FakeRegistry:
    """State shared by the registry and its CDN; tests change the knobs between pulls."""

    manifests: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (ns/model, tag) -> bytes
    blobs: dict[str, bytes] = field(default_factory=dict)  # digest -> bytes served
    requests: list[Seen] = field(default_factory=list)
    redirect_blobs: bool = False  # blob GETs answer 307 to the CDN
    require_token: bool = False  # 401 with a Bearer challenge until a request carries TOKEN
    cut_after: int | None = None  # each ranged blob response sends this many bytes, then closes
    cuts_left: int = 0  # ...for this many responses (then normal again)
    delay_s: float = 0.0  # a pause before each blob body (holds downloads open)
    gate: threading.Event | None = None  # when set, blob bodies wait for it
    redirect_uploads: bool = False  # PATCHed parts answer 307: the part goes to the CDN with PUT
    uploads: dict[str, bytearray] = field(default_factory=dict)  # upload id -> bytes so far
    url: str = ""
    cdn_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_model(self, repo: str, tag: str, layers: list[tuple[str, bytes]], config: dict[str, Any]) -> bytes:
        """Store the blobs and a manifest naming them (layers: media type, bytes); returns the manifest."""
        config_bytes = orjson.dumps(config)
        entries = []
        for media_type, data in layers:
            self.blobs[digest_of(data)] = data
            entries.append({"mediaType": media_type, "digest": digest_of(data), "size": len(data)})
        self.blobs[digest_of(config_bytes)] = config_bytes
        manifest = orjson.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {"mediaType": CONFIG_TYPE, "digest": digest_of(config_bytes), "size": len(config_bytes)},
                "layers": entries,
            }
        )
        self.manifests[(repo, tag)] = manifest
        return manifest

    def seen(self, method: str | None = None, pattern: str = "", server: str | None = None) -> list[Seen]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method)
            and re.search(pattern, r.path)
            and (server is None or r.server == server)
        ]


# How Ollama commits an upload: the digest, and an etag of the parts' md5s.
_COMMIT = re.compile(r"/uploads/(u\d+)\?_state=s\d+&digest=(sha256%3A[0-9a-f]{64})&etag=[0-9a-f]{32}-\d+")


def _handler(state: FakeRegistry, server_name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self) -> None:
            with state.lock:
                state.requests.append(Seen(self.command, self.path, dict(self.headers.items()), server_name))

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str, message: str) -> None:
            body = orjson.dumps({"errors": [{"code": code, "message": message}]})
            self._send(status, body, {"Content-Type": "application/json"})

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            self._record()
            if server_name == "cdn":
                m = re.fullmatch(r"/blobs/(sha256:[0-9a-f]{64})\?signature=\w+", self.path)
                if m is None:
                    return self._error(403, "DENIED", "bad signature")
                return self._blob(m.group(1))
            if self.path.startswith("/token"):
                return self._send(200, orjson.dumps({"token": TOKEN}), {"Content-Type": "application/json"})
            if self._challenged("pull"):
                return None
            if m := re.fullmatch(r"/v2/([^/]+/[^/]+)/manifests/([^/]+)", self.path):
                manifest = state.manifests.get((m.group(1), m.group(2)))
                if manifest is None:
                    return self._error(404, "MANIFEST_UNKNOWN", "manifest unknown")
                return self._send(200, manifest, {"Content-Type": MANIFEST_TYPE})
            if m := re.fullmatch(r"/v2/([^/]+/[^/]+)/blobs/(sha256:[0-9a-f]{64})", self.path):
                digest = m.group(2)
                if digest not in state.blobs:
                    return self._error(404, "BLOB_UNKNOWN", "blob unknown to registry")
                if state.redirect_blobs:
                    return self._send(307, b"", {"Location": f"{state.cdn_url}/blobs/{digest}?signature=abc123"})
                return self._blob(digest)
            return self._error(404, "NOT_FOUND", "not found")

        def _challenged(self, action: str) -> bool:
            """Answer 401 with a Bearer challenge unless the request carries the token."""
            if not state.require_token or self.headers.get("Authorization") == f"Bearer {TOKEN}":
                return False
            m = re.match(r"/v2/([^/]+/[^/]+)/", self.path)
            scope = f"repository:{m.group(1) if m else ''}:{action}"
            challenge = f'Bearer realm="{state.url}/token",service="fake-registry",scope="{scope}"'
            body = orjson.dumps({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]})
            self._send(401, body, {"WWW-Authenticate": challenge, "Content-Type": "application/json"})
            return True

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_POST(self) -> None:
            self._record()
            body = self._body()
            if self._challenged("push"):
                return None
            if re.fullmatch(r"/v2/([^/]+/[^/]+)/blobs/uploads/", self.path) is None or body:
                return self._error(404, "NOT_FOUND", "not found")
            upload = f"u{len(state.uploads)}"
            state.uploads[upload] = bytearray()
            return self._send(202, b"", {"Location": f"/uploads/{upload}?_state=s0", "Docker-Upload-UUID": upload})

        def do_PATCH(self) -> None:
            self._record()
            body = self._body()
            if self._challenged("push"):
                return None
            m = re.fullmatch(r"/uploads/(u\d+)\?_state=s\d+", self.path)
            if m is None:
                return self._error(404, "BLOB_UPLOAD_UNKNOWN", "blob upload unknown")
            upload = m.group(1)
            start, _, _end = self.headers.get("Content-Range", "0-").partition("-")
            if int(start) != len(state.uploads[upload]):
                return self._error(416, "BLOB_UPLOAD_INVALID", "range out of order")
            following = f"/uploads/{upload}?_state=s{len(state.uploads[upload]) + len(body)}"
            if state.redirect_uploads:
                # As ollama.com does: the part goes to storage named by the Location, with PUT.
                location = f"{state.cdn_url}/parts/{upload}?offset={start}&signature=abc123"
                return self._send(307, b"", {"Location": location, "Docker-Upload-Location": following})
            state.uploads[upload] += body
            return self._send(202, b"", {"Location": following, "Range": f"0-{len(state.uploads[upload]) - 1}"})

        def do_PUT(self) -> None:
            self._record()
            body = self._body()
            if server_name == "cdn":
                m = re.fullmatch(r"/parts/(u\d+)\?offset=(\d+)&signature=\w+", self.path)
                if m is None or int(m.group(2)) != len(state.uploads[m.group(1)]):
                    return self._error(403, "DENIED", "bad part")
                state.uploads[m.group(1)] += body
                return self._send(200)
            if self._challenged("push"):
                return None
            if m := re.fullmatch(r"/v2/([^/]+/[^/]+)/manifests/([^/]+)", self.path):
                if self.headers.get("Content-Type") != MANIFEST_TYPE:
                    return self._error(400, "MANIFEST_INVALID", "wrong content type")
                for layer in [orjson.loads(body)["config"], *orjson.loads(body)["layers"]]:
                    if layer["digest"] not in state.blobs:
                        return self._error(400, "MANIFEST_BLOB_UNKNOWN", layer["digest"])
                state.manifests[(m.group(1), m.group(2))] = body
                return self._send(201)
            if m := _COMMIT.fullmatch(self.path):
                data = bytes(state.uploads.pop(m.group(1))) + body
                digest = m.group(2).replace("%3A", ":")
                if digest_of(data) != digest:
                    return self._error(400, "DIGEST_INVALID", "provided digest did not match uploaded content")
                state.blobs[digest] = data
                return self._send(201, b"", {"Location": f"/v2/blobs/{digest}"})
            return self._error(404, "NOT_FOUND", "not found")

        def _blob(self, digest: str) -> None:
            data = state.blobs[digest]
            start, end = 0, len(data) - 1
            status = 200
            if m := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")):
                start = int(m.group(1))
                end = min(int(m.group(2)), end) if m.group(2) else end
                status = 206
            body = data[start : end + 1]
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "application/octet-stream")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.end_headers()
            if self.command == "HEAD":
                return
            if state.gate is not None:
                state.gate.wait(30)
            if state.delay_s:
                threading.Event().wait(state.delay_s)
            with state.lock:  # only ranged requests (downloads) are cut, not a look at the headers
                cut = state.cut_after if state.cuts_left > 0 and status == 206 else None
                if cut is not None:
                    state.cuts_left -= 1
            if cut is not None and cut < len(body):
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(body)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up mid-body (a cut test, a pull that only wanted the headers)


@contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def fake_registry() -> Iterator[FakeRegistry]:
    """The registry and its CDN, each on its own loopback port."""
    state = FakeRegistry()
    with _serve(_handler(state, "registry")) as url, _serve(_handler(state, "cdn")) as cdn_url:
        state.url, state.cdn_url = url, cdn_url
        yield state


# -- an Ollama key (~/.ollama/id_ed25519) for the tests that sign token requests --------


def ssh_wire(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def openssh_key(seed: bytes, comment: bytes = b"me@host") -> str:
    """An unencrypted OpenSSH ed25519 private key file, laid out as ssh-keygen writes one."""
    public = public_key(seed)
    blob = ssh_wire(b"ssh-ed25519", public)
    private = b"\x01\x02\x03\x04" * 2 + ssh_wire(b"ssh-ed25519", public, seed + public, comment)
    private += bytes(range(1, 1 + (-len(private)) % 8))
    data = b"openssh-key-v1\0" + ssh_wire(b"none", b"none", b"") + (1).to_bytes(4, "big") + ssh_wire(blob, private)
    body = base64.b64encode(data).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *lines, "-----END OPENSSH PRIVATE KEY-----", ""])
