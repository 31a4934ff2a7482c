"""Where CLI commands send their work: the server at OLLAMA_HOST when one answers, else the local store.

Both backends speak the same dicts (Ollama's JSON) and raise ``CllmError`` with Ollama's messages,
so a command never knows which one it has.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

from cllm_ollama.api.ollama.model_views import show_response, tag_entry
from cllm_ollama.config import Settings, proxied
from cllm_ollama.engine.quantizer import quantize_file
from cllm_ollama.errors import CllmError
from cllm_ollama.store.blobs import sha256_file
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.modelfile import Modelfile, create_body
from cllm_ollama.store.pull import pull_model
from cllm_ollama.store.push import push_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore

Report = Callable[[dict[str, Any]], None]
# How long the health check (and ``-v``'s version) waits: a refused connection answers at once, a
# distant or waking server (a TLS handshake, scale-from-zero) may take seconds. Ollama's waits for
# ever (Go's default client); a second said "no server" to a server that was there.
PROBE_TIMEOUT_S = 10.0


class Backend(Protocol):
    def tags(self) -> list[dict[str, Any]]: ...
    def show(self, name: str, verbose: bool = False) -> dict[str, Any]: ...
    def copy(self, source: str, destination: str) -> None: ...
    def delete(self, name: str) -> None: ...
    def pull(self, name: str, report: Report, insecure: bool = False) -> None: ...
    def push(self, name: str, report: Report, insecure: bool = False) -> None: ...
    def create(
        self,
        name: str,
        modelfile: Modelfile,
        base_dir: Path,
        report: Report,
        quantize: str = "",
        draft_quantize: str = "",
    ) -> None: ...


class NoServer(CllmError):
    def __init__(self, url: str) -> None:
        super().__init__(f"could not connect to cllm at {url}: start it with `cllm serve`")


class Unauthorized(CllmError):
    """The server wants an API key (its CLLM_API_KEY) that this command did not send, or sent wrong."""

    def __init__(self, sent: bool) -> None:
        if sent:
            message = "unauthorized: the server refused the key in CLLM_API_KEY (or OLLAMA_API_KEY)"
        else:
            message = "unauthorized: set CLLM_API_KEY (or OLLAMA_API_KEY) to one of the server's keys"
        super().__init__(message, 401)


def auth_headers(settings: Settings) -> dict[str, str]:
    """The first CLLM_API_KEY key (else OLLAMA_API_KEY) as a Bearer token; none when both are unset."""
    return {"Authorization": f"Bearer {settings.client_api_key}"} if settings.client_api_key else {}


def server(settings: Settings) -> HttpBackend:
    """The running server, for the commands that need the engine (`run`, `ps`)."""
    backend = connect(settings, local=False)
    assert isinstance(backend, HttpBackend)
    return backend


def connect(settings: Settings, local: bool = True) -> Backend:
    """The running server if ``HEAD /`` answers (as the ollama CLI checks); else, where ``local``
    and CLLM_LOCAL_STORE allow it, the store on disk; else ``NoServer``, as ollama's commands
    fail (``ollama list`` is a common health check: it must fail while the server is down).

    The probe sends no key: the health check needs none, so it works whatever the server's setting.
    """
    try:
        httpx.head(settings.host.url + "/", timeout=PROBE_TIMEOUT_S, trust_env=proxied(settings.host.url))
    except httpx.TransportError:
        if local and settings.local_store:
            return LocalBackend(ModelStore(settings.models_dir), settings)
        raise NoServer(settings.host.url) from None
    return HttpBackend(settings.host.url, headers=auth_headers(settings))


class LocalBackend:
    def __init__(self, store: ModelStore, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings(models_dir=store.root)

    def tags(self) -> list[dict[str, Any]]:
        return [tag_entry(record) for record in self.store.list_models(broken=True)]

    def show(self, name: str, verbose: bool = False) -> dict[str, Any]:
        return show_response(self.store.get(name), verbose=verbose)

    def copy(self, source: str, destination: str) -> None:
        self.store.copy(source, destination)

    def delete(self, name: str) -> None:
        self.store.delete(name)

    def pull(self, name: str, report: Report, insecure: bool = False) -> None:
        pull_model(self.store, name, report, options=RegistryOptions.from_settings(self.settings, insecure=insecure))

    def push(self, name: str, report: Report, insecure: bool = False) -> None:
        push_model(self.store, name, report, options=RegistryOptions.from_settings(self.settings, insecure=insecure))

    def create(
        self,
        name: str,
        modelfile: Modelfile,
        base_dir: Path,
        report: Report,
        quantize: str = "",
        draft_quantize: str = "",
    ) -> None:
        def upload(path: Path) -> str:
            report({"status": f"copying file {path.name}"})
            with open(path, "rb") as f:
                return self.store.write_blob_from(f)

        req = CreateRequest.from_json(create_body(name, modelfile, base_dir, upload, quantize, draft_quantize))
        create_model(self.store, req, report, noprune=self.settings.noprune, pull=self.pull, quantize=quantize_file)


class HttpBackend:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        # No read timeout: a pull or create may be silent for long stretches (hashing a big file).
        timeout = httpx.Timeout(None, connect=10.0)
        self.client = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, trust_env=proxied(base_url))

    def close(self) -> None:
        """Its pooled connections closed (else each command leaves a socket to the garbage collector)."""
        self.client.close()

    def _raise_for_error(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        if response.status_code == 401:
            raise Unauthorized(sent="authorization" in self.client.headers)
        response.read()
        try:
            message = response.json().get("error") or response.text
        except (json.JSONDecodeError, AttributeError):
            message = response.text
        raise CllmError(message, response.status_code)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        response = self.client.request(method, path, json=body)
        self._raise_for_error(response)
        return response

    def stream(self, path: str, body: dict[str, Any], report: Report) -> None:
        """POST and hand each NDJSON object to ``report``; an error line raises ``CllmError``."""
        with self.client.stream("POST", path, json=body) as response:
            self._raise_for_error(response)
            for line in response.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event.get("error"):
                    raise CllmError(event["error"])
                report(event)

    def load(self, name: str, keep_alive: str | None) -> None:
        """An empty prompt: the model is loaded, nothing generated (``ollama run MODEL ""``)."""
        body: dict[str, Any] = {"model": name}
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        self._call("POST", "/api/generate", body)

    def unload(self, name: str) -> None:
        """``keep_alive: 0`` with no prompt: the model leaves memory now (``ollama stop``)."""
        self._call("POST", "/api/generate", {"model": name, "keep_alive": 0})

    def embed(
        self, name: str, text: str, keep_alive: str | None, truncate: bool | None = None, dimensions: int = 0
    ) -> list[list[float]]:
        """``text``'s embedding; ``truncate`` and ``dimensions`` sent only where set, as ollama run sends them."""
        body: dict[str, Any] = {"model": name, "input": text}
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        if truncate is not None:
            body["truncate"] = truncate
        if dimensions > 0:
            body["dimensions"] = dimensions
        return self._call("POST", "/api/embed", body).json()["embeddings"]  # type: ignore[no-any-return]

    def running(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/ps").json()["models"]  # type: ignore[no-any-return]

    def tags(self) -> list[dict[str, Any]]:
        return self._call("GET", "/api/tags").json()["models"]

    def recommendations(self) -> list[dict[str, Any]]:
        """The server's model recommendations, which Ollama's launcher offers to pull; none where
        the server has none (an older one: a 404)."""
        try:
            found = self._call("GET", "/api/experimental/model-recommendations").json()["recommendations"]
        except (CllmError, KeyError, TypeError, ValueError):
            return []
        return [r for r in found if isinstance(r, dict) and isinstance(r.get("model"), str)]

    def show(
        self, name: str, verbose: bool = False, *, system: str = "", options: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``/api/show``; a chat's ``system`` and ``options`` go with it, as ``ollama run``'s ``/show``
        sends them, so that its Modelfile and system are the session's."""
        body: dict[str, Any] = {"model": name, "verbose": verbose}
        if system:
            body["system"] = system
        if options:
            body["options"] = options
        return self._call("POST", "/api/show", body).json()

    def copy(self, source: str, destination: str) -> None:
        self._call("POST", "/api/copy", {"source": source, "destination": destination})

    def delete(self, name: str) -> None:
        self._call("DELETE", "/api/delete", {"model": name})

    def pull(self, name: str, report: Report, insecure: bool = False) -> None:
        self.stream("/api/pull", {"model": name, "insecure": insecure}, report)

    def push(self, name: str, report: Report, insecure: bool = False) -> None:
        self.stream("/api/push", {"model": name, "insecure": insecure}, report)

    def create(
        self,
        name: str,
        modelfile: Modelfile,
        base_dir: Path,
        report: Report,
        quantize: str = "",
        draft_quantize: str = "",
    ) -> None:
        def upload(path: Path) -> str:
            digest = "sha256:" + sha256_file(path)
            if self.client.head(f"/api/blobs/{digest}").status_code != 200:
                report({"status": f"copying file {digest}"})
                with open(path, "rb") as f:
                    self._raise_for_error(self.client.post(f"/api/blobs/{digest}", content=f))
            return digest

        self.stream("/api/create", create_body(name, modelfile, base_dir, upload, quantize, draft_quantize), report)
