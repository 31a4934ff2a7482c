"""Requests generated from the served OpenAPI document, sent to a real server, and what must hold of the answers.

Schemathesis turns each operation of ``cllm_ollama.api.openapi`` into a Hypothesis strategy: valid
bodies (positive) and bodies that break the schema (negative: wrong types, missing fields, non-JSON
bytes). Each request is then steered a little so that it reaches the model code (its model is often
one the store has) and stays cheap (generation limited to a few tokens), and the answer is checked:

- no 5xx, except the ones Ollama itself answers with (``ALLOWED_5XX``, each with why);
- errors in the endpoint's shape: ``{"error": "..."}`` on /api, OpenAI's ``{"error": {...}}`` on /v1;
- the status is one the document lists for the operation;
- a stream ends properly (a ``done`` line, ``[DONE]``, ``response.completed``) or with an error line
  that is not an unexpected exception;
- an answer within ``timeout`` seconds (else a hang).

tests/api/test_schema_fuzz.py runs a bounded number of examples in CI against an in-process server;
``python -m tests.schema_fuzz --examples 2000`` runs many more against a ``cllm serve`` process it
starts on a scratch store with the test models (loopback only), and prints the figures.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import response_schema_conformance

from cllm_ollama.api.openapi import document

MODELS = ("tiny", "endless")  # the test store's models; "endless" never stops by itself
MAX_TOKENS = 8  # what a generated request may generate at most: generation must not dominate
SCHEMA = schemathesis.openapi.from_dict(document())
OPERATIONS = {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in SCHEMA.get_all_operations())}


def has_body(label: str) -> bool:
    return "requestBody" in OPERATIONS[label].definition.raw


MODES = {"positive": GenerationMode.POSITIVE, "negative": GenerationMode.NEGATIVE}


def runs() -> list[tuple[str, str]]:
    """(operation, mode) pairs: schema-breaking requests only where there is a body to break."""
    return [(label, mode) for label in OPERATIONS for mode in MODES if mode == "positive" or has_body(label)]


# 5xx answers Ollama gives too, so clients already handle them; anything else 5xx is a bug.
ALLOWED_5XX: list[tuple[int, re.Pattern[str], str]] = [
    (
        500,
        re.compile(r'^option "[^"]*" must be of (type \w+|an array of strings)$'),
        "a wrong-typed value inside native `options`: Ollama's api.Options FromMap error reaches "
        "handleScheduleError's default branch, a 500",
    ),
    (
        500,
        re.compile(r'^invalid format: .*; expected "json" or a valid JSON Schema object$', re.S),
        'a `format` that is neither "json" nor an object: llama-server refuses it and Ollama passes the 500 on',
    ),
    (
        500,
        re.compile(r"^template: ", re.S),
        "a request `template` Go cannot parse or execute: Ollama answers template errors with 500",
    ),
    (
        500,
        re.compile(r"^pull model manifest: |^(pull|download|hub)\b.*", re.S | re.I),
        "a pull that fails with stream:false: Ollama's waitForStream answers 500 with the pull's error "
        "(the fuzz never reaches a real hub)",
    ),
    (
        501,
        re.compile(r"^cllm does not push models"),
        "/api/push: cllm pulls from the Hugging Face Hub and has no registry to push to",
    ),
]

_GENERATING = (
    "/api/generate",
    "/api/chat",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
)
_NAMED = (*_GENERATING, "/api/embed", "/api/embeddings", "/api/show", "/v1/embeddings", "/v1/audio/transcriptions")
_WRITES = ("/api/delete", "/api/create", "/api/pull")  # their target name must not be a test model


def _is_test_model(name: object) -> bool:
    if not isinstance(name, str):
        return False
    return name.lower().rsplit("/", 1)[-1].split(":", 1)[0] in MODELS


def _bound(body: dict[str, Any], key: str, *, only_if_set: bool = False) -> None:
    """At most MAX_TOKENS to generate; wrong types are left alone (they are the point)."""
    value = body.get(key)
    if value is None and only_if_set:
        return
    if value is None or (
        isinstance(value, int | float) and not isinstance(value, bool) and not 0 <= value <= MAX_TOKENS
    ):
        body[key] = MAX_TOKENS


def steer(case: schemathesis.Case, model: str | None) -> None:
    """Point a generated request at a real model (``model``, unless None) and keep it cheap and harmless."""
    path = case.operation.path
    if path == "/v1/models/{model}" and model:
        case.path_parameters = {"model": model}
    body = case.body
    if not isinstance(body, dict):
        return
    if path in _NAMED and model:
        body["model"] = model
    if path == "/api/copy":
        if model:
            body["source"] = model
        if _is_test_model(body.get("destination")):
            body["destination"] = "scratch"
    if path in _WRITES:
        for key in ("model", "name"):
            if _is_test_model(body.get(key)):
                body[key] = "scratch"
        if path == "/api/create" and model:
            body["from"] = model
    if path in ("/api/generate", "/api/chat"):
        options = body.get("options")
        if options is None:
            body["options"] = {"num_predict": MAX_TOKENS}
        elif isinstance(options, dict):
            _bound(options, "num_predict")
    elif path in ("/v1/chat/completions", "/v1/completions"):
        _bound(body, "max_tokens")
        _bound(body, "max_completion_tokens", only_if_set=True)
    elif path == "/v1/responses":
        _bound(body, "max_output_tokens")
        # Decoded since Codex's requests carry them, and described since the schemas generate the document.
        _bound(body, "max_tokens", only_if_set=True)
        _bound(body, "max_completion_tokens", only_if_set=True)
    elif path == "/v1/messages":
        _bound(body, "max_tokens")


@st.composite
def requests_for(draw: st.DrawFn, label: str, mode: str) -> schemathesis.Case:
    case = draw(OPERATIONS[label].as_strategy(generation_mode=MODES[mode]))
    steer(case, draw(st.sampled_from((*MODELS, None))))
    return case


# ---------------------------------------------------------------- checks


def error_message(path: str, body: object) -> str | None:
    """The message of an error body in the endpoint's shape, or None if the shape is wrong."""
    if path.startswith("/v1/messages"):  # /v1/messages/count_tokens answers in its shape too
        if not isinstance(body, dict) or body.get("type") != "error" or set(body) != {"type", "error", "request_id"}:
            return None
        error = body["error"]
        ok = isinstance(error, dict) and isinstance(error.get("message"), str) and isinstance(error.get("type"), str)
        return str(error["message"]) if ok else None
    if not isinstance(body, dict) or set(body) != {"error"}:
        return None
    error = body["error"]
    if path.startswith("/v1/"):
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return None
        if error.get("type") not in ("invalid_request_error", "not_found_error", "api_error"):
            return None
        return str(error["message"])
    return error if isinstance(error, str) else None


def _unexpected(message: str) -> bool:
    """An exception no handler meant: the error boundaries say "internal error: ..."."""
    return message.startswith("internal error")


def allowed_5xx(status: int, message: str) -> bool:
    return not _unexpected(message) and any(status == code and p.search(message) for code, p, _ in ALLOWED_5XX)


@functools.cache
def _line_validator(ref: str) -> jsonschema.Draft202012Validator:
    """Validates one streamed object against the document's schema ``ref`` (#/components/...)."""
    return jsonschema.Draft202012Validator({"$ref": ref, "components": document()["components"]})


def check_ndjson(text: str, line_schema: str | None = None) -> list[str]:
    lines = text.splitlines()
    if not lines:
        return ["an empty NDJSON stream"]
    try:
        objects = [json.loads(line) for line in lines]
    except ValueError:
        return [f"a line that is not JSON in an NDJSON stream: {text[-300:]!r}"]
    if line_schema is not None:
        for obj in objects:
            if "error" not in obj and (
                error := jsonschema.exceptions.best_match(_line_validator(line_schema).iter_errors(obj))
            ):
                return [f"a streamed line that does not match {line_schema}: {error.message[:300]} in {obj!r:.300}"]
    last = objects[-1]
    if "error" in last:
        return (
            [f"a stream ended by an unexpected exception: {last['error']!r}"] if _unexpected(str(last["error"])) else []
        )
    if not (last.get("done") is True or "status" in last):
        return [f"an NDJSON stream that stops without a final line: {lines[-1][:300]!r}"]
    return []


def check_sse(path: str, text: str) -> list[str]:
    data = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
    if not data:
        return ["an empty event stream"]
    errors = [d for d in data if '"error"' in d and _unexpected(json.loads(d).get("error", {}).get("message", ""))]
    if any(d.startswith('{"type":"error"') and _unexpected(json.loads(d).get("message", "")) for d in data):
        errors.append("error event")
    if errors:
        return [f"a stream ended by an unexpected exception: {errors[0][:300]}"]
    if path == "/v1/responses":
        last = json.loads(data[-1]).get("type")
        return [] if last in ("response.completed", "error") else [f"a Responses stream cut short after {last!r}"]
    if path == "/v1/messages":
        final = json.loads(data[-1])
        if final.get("type") == "error" and _unexpected(final.get("error", {}).get("message", "")):
            return [f"a stream ended by an unexpected exception: {data[-1][:300]}"]
        ended = final.get("type") in ("message_stop", "error")
        return [] if ended else [f"a Messages stream cut short after {final.get('type')!r}"]
    return [] if data[-1] == "[DONE]" else [f"an event stream without [DONE]: {data[-1][:300]!r}"]


def problems(case: schemathesis.Case, response: httpx.Response) -> list[str]:
    """What is wrong with ``response`` to ``case`` (nothing, for a correct server)."""
    path, method, status = case.operation.path, case.operation.method.upper(), response.status_code
    out = []
    documented = case.operation.definition.raw["responses"]
    if str(status) not in documented:
        out.append(f"status {status} is not documented for {method} {path} ({sorted(documented)})")
    ctype = response.headers.get("content-type", "")
    if method == "HEAD" or status == 403:
        return out
    if status >= 400:
        try:
            body = response.json()
        except ValueError:
            return [*out, f"a {status} whose body is not JSON: {response.text[:300]!r}"]
        message = error_message(path, body)
        if message is None:
            return [*out, f"a {status} not in the endpoint's error shape: {response.text[:300]!r}"]
        if status >= 500 and not allowed_5xx(status, message):
            out.append(f"{status} {message[:300]!r}")
        return out
    if ctype.startswith("application/json"):
        try:
            case.validate_response(response, checks=[response_schema_conformance])
        except FailureGroup as group:  # the body does not match the document
            details = "; ".join(f"{f.title}: {f.message}" for f in group.exceptions)
            out.append(f"a {status} body that does not match the document: {details[:600]}")
    elif ctype.startswith("application/x-ndjson"):
        # Each line is the object the non-streamed answer would be (GenerateResponse, ChatResponse...).
        out += check_ndjson(response.text, documented["200"]["content"]["application/json"]["schema"]["$ref"])
    elif ctype.startswith("text/event-stream"):
        out += check_sse(path, response.text)
    return out


# ---------------------------------------------------------------- running


@dataclass
class Tally:
    tried: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    hangs: int = 0
    crashes: int = 0  # connection refused or cut before an answer
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0

    def report(self) -> str:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        return (
            f"requests tried: {self.tried}\nstatuses: {codes}\nfailures: {len(self.failures)}\n"
            f"hangs: {self.hangs}\nconnection errors: {self.crashes}\nslowest answer: {self.slowest:.1f} s"
        )


def send(client: httpx.Client, base_url: str, case: schemathesis.Case) -> httpx.Response:
    kwargs = case.as_transport_kwargs(base_url=base_url)
    content, headers = kwargs.get("data"), dict(kwargs.get("headers") or {})
    if "json" in kwargs:
        content = json.dumps(kwargs["json"]).encode()
    elif kwargs.get("files") is not None or isinstance(content, dict):
        # A multipart form (the transcription endpoint's), in requests' shape: encoded as requests
        # encodes it (what schemathesis prepares it for), sent as the bytes it makes.
        prepared = requests.PreparedRequest()
        prepared.prepare_headers(None)
        prepared.prepare_body(content, kwargs.get("files"))
        content = prepared.body
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        headers["Content-Type"] = prepared.headers["Content-Type"]
    method, url, params = kwargs["method"], kwargs["url"], kwargs.get("params")
    return client.request(method, url, params=params, headers=headers, content=content)


def _reproducer(case: schemathesis.Case, base_url: str) -> str:
    try:
        curl = case.as_curl_command(base_url=base_url)
    except Exception:  # a reproducer that cannot be spelled is still worth the failure
        curl = f"{case.operation.method.upper()} {case.formatted_path} body={case.body!r}"
    return curl if len(curl) < 1500 else curl[:1500] + "..."


def fuzz_operation(
    base_url: str,
    label: str,
    mode: str,
    examples: int,
    tally: Tally,
    *,
    timeout: float = 30.0,
    seed: int | None = None,
    on_request: Callable[[], None] | None = None,
) -> None:
    """Send up to ``examples`` generated requests for one operation; what goes wrong lands in ``tally``."""
    client = httpx.Client(timeout=timeout)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is None,
        phases=[Phase.explicit, Phase.generate],  # nothing raises, so nothing to shrink
        suppress_health_check=list(HealthCheck),
    )
    @given(requests_for(label, mode))
    def probe(case: schemathesis.Case) -> None:
        tally.tried += 1
        t0 = time.monotonic()
        try:
            response = send(client, base_url, case)
        except httpx.TimeoutException:
            tally.hangs += 1
            tally.failures.append(f"{label}: no answer in {timeout:.0f} s\n  {_reproducer(case, base_url)}")
            return
        except httpx.TransportError as exc:
            tally.crashes += 1
            tally.failures.append(f"{label}: {exc!r}\n  {_reproducer(case, base_url)}")
            return
        finally:
            tally.slowest = max(tally.slowest, time.monotonic() - t0)
            if on_request is not None:
                on_request()
        tally.statuses[response.status_code] += 1
        for problem in problems(case, response):
            tally.failures.append(f"{label} ({mode}): {problem}\n  {_reproducer(case, base_url)}")

    try:
        (hypothesis_seed(seed)(probe) if seed is not None else probe)()
    finally:
        client.close()


def slots_all_free(base_url: str, timeout: float = 30.0) -> list[str]:
    """Unload every model (keep_alive 0): a model some request still holds stays in /api/ps."""
    with httpx.Client(base_url=base_url, timeout=timeout) as client:
        for model in MODELS:
            client.post("/api/generate", json={"model": model, "keep_alive": 0}).raise_for_status()
        deadline = time.monotonic() + timeout
        while (running := client.get("/api/ps").json()["models"]) and time.monotonic() < deadline:
            time.sleep(0.2)
    return [m["name"] for m in running]


def server_answers(base_url: str) -> bool:
    """Still serving: the version, and a short generation and chat from a real model."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        ok = client.get("/api/version").status_code == 200
        r = client.post(
            "/api/generate", json={"model": "tiny", "prompt": "hi", "stream": False, "options": {"num_predict": 2}}
        )
        ok = ok and r.status_code == 200 and r.json()["done"] is True
        chat = {"model": "endless", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        r = client.post("/v1/chat/completions", json=chat)
        return ok and r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "length"


# ---------------------------------------------------------------- a live `cllm serve` (the long fuzz, the soak)


def write_store(models_dir: Path) -> None:
    """The test suite's store: ``tiny`` and ``endless`` (2-layer qwen3 GGUFs written on the spot)."""
    import gguf

    from cllm_ollama.store.create import import_gguf
    from cllm_ollama.store.store import ModelStore
    from cllm_ollama.testing.ggufs import write_qwen3

    store = ModelStore(models_dir)
    for name, endless in (("tiny", False), ("endless", True)):
        path = models_dir.parent / f"{name}.gguf"
        write_qwen3(path, qtype=gguf.GGMLQuantizationType.Q8_0, endless=endless)
        import_gguf(store, name, path)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    models: Path  # its store (OLLAMA_MODELS)

    def alive(self) -> bool:
        return self.process.poll() is None

    def tracebacks(self) -> list[str]:
        """Each traceback in the server's log, with the line that introduced it."""
        text = self.log.read_text(errors="replace")
        parts = text.split("Traceback (most recent call last)")
        return [
            f"{before.splitlines()[-1] if before.strip() else ''}\n...\n{after[:4000]}"
            for before, after in itertools.pairwise(parts)
        ]


@dataclass
class Afterwards:
    """A live server once a long run (the fuzz, the soak) is over: whether it lived and still
    answers, its RSS, the models it would not unload (leaked slots) and the tracebacks it logged."""

    alive: bool
    answers: bool
    rss_after: int
    held: list[str]
    rss_unloaded: int
    tracebacks: list[str]

    @classmethod
    def check(cls, server: LiveServer) -> Afterwards:
        alive = server.alive()
        answers = alive and server_answers(server.url)
        rss_after = rss_kib(server.process.pid) if alive else 0
        held = slots_all_free(server.url) if alive else ["?"]
        rss_unloaded = rss_kib(server.process.pid) if alive else 0
        return cls(alive, answers, rss_after, held, rss_unloaded, server.tracebacks())

    @property
    def ok(self) -> bool:
        return self.alive and self.answers and not self.held and not self.tracebacks

    def report_end(self, rss_before: int, failures: list[str], shown: int, peak: int | None = None) -> None:
        """The report's last lines: the RSS, the leaked slots, the first ``shown`` failures and tracebacks."""
        names, kib = ("before/after", [rss_before]) if peak is None else ("before/peak/after", [rss_before, peak])
        print(
            f"server RSS {names}: {' / '.join(f'{k / 1024:.0f}' for k in [*kib, self.rss_after])} MiB"
            f" ({self.rss_unloaded / 1024:.0f} MiB once the models unloaded)"
        )
        print(f"models still held after unloading (leaked slots): {self.held or 'none'}")
        for failure in failures[:shown]:
            print("FAIL", failure)
        for traceback in self.tracebacks[:3]:
            print("TRACEBACK", traceback)


@contextmanager
def cllm_serve(
    num_parallel: int = 4,
    context_length: int = 512,
    extra_env: dict[str, str] | None = None,
    models: Path | None = None,
) -> Iterator[LiveServer]:
    """``cllm serve`` on a free loopback port over a scratch store (or ``models``, an existing one,
    kept: a server restarted on it finds what the last one left); stopped (SIGTERM) on exit."""
    import socket

    with tempfile.TemporaryDirectory(prefix="cllm-fuzz-") as tmp:
        if models is None:
            models = Path(tmp) / "models"
            write_store(models)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        # No key from the caller's shell (OLLAMA_API_KEY may be an ollama.com key): the requests carry none.
        env = (
            {k: v for k, v in os.environ.items() if k not in ("CLLM_API_KEY", "OLLAMA_API_KEY")}
            | {
                "OLLAMA_HOST": f"127.0.0.1:{port}",
                "OLLAMA_MODELS": str(models),
                "OLLAMA_NUM_PARALLEL": str(num_parallel),
                "OLLAMA_CONTEXT_LENGTH": str(context_length),
                # Pulls must never leave the machine: a closed loopback port answers at once.
                "HF_ENDPOINT": "http://127.0.0.1:9",
                "HF_HUB_DISABLE_TELEMETRY": "1",
            }
            | (extra_env or {})
        )
        log = Path(tmp) / "server.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", "from cllm_ollama.cli.main import main; main()", "serve"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = LiveServer(f"http://127.0.0.1:{port}", process, log, models)
        try:
            deadline = time.monotonic() + 60
            while True:
                if not server.alive():
                    raise RuntimeError(f"cllm serve exited: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(server.url + "/", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("cllm serve did not start in 60 s")
                time.sleep(0.2)
            yield server
        finally:
            if server.alive():
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m tests.schema_fuzz")
    parser.add_argument("--examples", type=int, default=2000, help="requests in all, spread over the operations")
    parser.add_argument("--seed", type=int, default=None, help="Hypothesis seed (random when not given)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds after which a request is a hang")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    # Bodies carry the bugs: the operations without one get a few examples, the rest share the budget.
    weights = {label: (6 if has_body(label) else 1) for label in OPERATIONS}
    unit = args.examples / sum(weights[label] for label, _ in runs())
    tally = Tally()
    t0 = time.monotonic()
    with cllm_serve() as server:
        server_answers(server.url)  # both models loaded: "before" is a server in use, as "after" is
        rss_before = rss_kib(server.process.pid)
        for label, mode in runs():
            if not server.alive():
                break
            examples = max(1, round(unit * weights[label]))
            fuzz_operation(server.url, label, mode, examples, tally, timeout=args.timeout, seed=seed)
            print(f"  {label:28} {mode:8} tried so far {tally.tried}", file=sys.stderr, flush=True)
        after = Afterwards.check(server)
    print(f"schema fuzz: seed {seed}, {time.monotonic() - t0:.0f} s")
    print(tally.report())
    print(f"server process died: {0 if after.alive else 1}")
    print(f"server answers afterwards: {after.answers}")
    print(f"tracebacks in the server log: {len(after.tracebacks)}")
    after.report_end(rss_before, tally.failures, shown=50)
    ok = after.ok and not tally.failures
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
