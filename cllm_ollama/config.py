"""All configuration, read once from the environment.

Ollama's ``OLLAMA_*`` variables are honoured with Ollama's parsing rules so an existing
setup carries over; a ``CLLM_*`` twin of each takes precedence. Nothing else in the
package reads ``os.environ`` for settings.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .engine.kv_types import KV_CACHE_TYPES
from .engine.media_budget import DEFAULT_AUDIO_SECONDS, DEFAULT_REQUEST_PIXELS, DEFAULT_SERVER_PIXELS, MediaLimits
from .gostrconv import PARSE_BOOL_FALSE, PARSE_BOOL_TRUE

DEFAULT_PORT = 11434
# Ollama's default is 1 slot. Continuous batching is the point of cllm: on a CPU, 8
# sequences decode at ~2.5x the aggregate rate of one, and the KV cost (8 x num_ctx) is modest.
DEFAULT_NUM_PARALLEL = 8
# Settings whose default depends on the device a model runs on (engine/tuning.py), by variable.
TUNABLE = {
    "num_parallel": "NUM_PARALLEL",
    "num_batch": "NUM_BATCH",
    "gap_fill": "GAP_FILL",
    "flash_attention": "FLASH_ATTENTION",
}
DEFAULT_CONTEXT_LENGTH = 4096
# No gaps filled on a CPU: a pass over the weights costs about a row there, and a row in a deep
# sequence more (engine/gap_fill.py); a model wholly on GPUs fills some (engine/tuning.py).
DEFAULT_GAP_FILL = 0
# How far a model's context grows, by reloading it, for a prompt that does not fit when nobody set
# num_ctx (not the request, not the Modelfile, not OLLAMA_CONTEXT_LENGTH): agents that talk /v1
# cannot set it, and their preamble (tool definitions first) would be cut. Ollama's advice for
# agents and coding tools is "at least 64000 tokens".
DEFAULT_CONTEXT_GROW = 65536
DEFAULT_KEEP_ALIVE_S = 300.0
DEFAULT_MAX_QUEUE = 512
# Ollama reads bodies without a bound. 32 MiB is Anthropic's request cap: more than a full
# 128K-token history as JSON (~1 MB) many times over, with room for a few base64 images;
# blob uploads (model weights) stream to disk and are exempt.
DEFAULT_MAX_BODY_SIZE = 32 << 20
# How long rendering one request's prompt may take (chat template, dropped-turn fitting).
DEFAULT_RENDER_TIMEOUT_S = 5.0
# How long, on SIGTERM/SIGINT, running requests may go on before they are ended.
DEFAULT_SHUTDOWN_GRACE_S = 5.0
# How long an accepted stream may go without a byte before it says it is alive (a long prefill
# sends nothing else): under the idle timeouts of clients and proxies (60 s in nginx and AWS's
# load balancers), and rare enough to cost nothing.
DEFAULT_STREAM_KEEPALIVE_S = 10.0
# OLLAMA_LOAD_TIMEOUT's default: how long a model's load may go without progress (Ollama's 5m).
DEFAULT_LOAD_TIMEOUT_S = 300.0
# How long a stream waits for its model to load before it gets its headers (and keep-alives).
DEFAULT_LOAD_HEADERS_S = 0.5
# Where names without a host (and registry.ollama.ai/... names) are pulled from and pushed to.
DEFAULT_REGISTRY_URL = "https://registry.ollama.ai"
FOREVER = math.inf
_MAX_DURATION_S = (2**63 - 1) / 1e9
DEFAULT_KV_CACHE_TYPE = "f16"

log = logging.getLogger("cllm.config")


class ConfigError(ValueError):
    """An environment variable or duration that cannot be parsed."""


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Parse a Go ``time.Duration`` string ("5m", "1h30m", "-1m", "0") into seconds."""
    s = text.strip()
    if not s:
        raise ConfigError(f'time: invalid duration "{text}"')
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            if re.fullmatch(r"[\d.]+", s[pos:]):
                raise ConfigError(f'time: missing unit in duration "{text}"')
            raise ConfigError(f'time: invalid duration "{text}"')
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def parse_keep_alive(value: object) -> float:
    """Ollama's keep_alive: a number of seconds or a duration string; negative means forever.

    Returns seconds, ``FOREVER`` for negative values. Raises ``ConfigError`` with Ollama's
    wording for the cases Ollama rejects.
    """
    if isinstance(value, bool):
        raise ConfigError("Unsupported type: 'bool'")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_go_duration(value)
    else:
        # Go's names for what JSON decodes to, as Ollama's message shows them.
        go_names: dict[type, str] = {list: "[]interface {}", dict: "map[string]interface {}"}
        go = go_names.get(type(value), type(value).__name__)
        raise ConfigError(f"Unsupported type: '{go}'")
    # Negative, or beyond Go's Duration range (~292 years): forever.
    return FOREVER if seconds < 0 or seconds >= _MAX_DURATION_S else seconds


def _env_keep_alive(text: str) -> float:
    """OLLAMA_KEEP_ALIVE: a Go duration, else a bare integer of seconds; anything else (``1.5``,
    ``1e3``, ``nan``) is Ollama's default, as its envconfig.KeepAlive reads it (with a warning here)."""
    try:
        return parse_keep_alive(text)
    except ConfigError:
        pass
    if re.fullmatch(r"[+-]?[0-9]{1,19}", text) and -(1 << 63) <= int(text) < 1 << 63:  # ParseInt's int64
        return parse_keep_alive(float(int(text)))
    log.warning("invalid environment variable KEEP_ALIVE=%r, using the default 5m", text)
    return DEFAULT_KEEP_ALIVE_S


def _env_path(text: str) -> Path:
    """A path from the environment, ``~`` expanded where it can be (Ollama takes it literally; a
    ``~user`` of no such user stays so here too, rather than stopping every command)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def proxied(url: str) -> bool:
    """Whether HTTP_PROXY and its kin may carry requests to ``url`` (httpx's ``trust_env``): never
    to localhost or a loopback address, as Go's ``ProxyFromEnvironment`` decides for Ollama's
    clients (httpx would send even those through the proxy)."""
    host = urlsplit(url).hostname or ""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def _go_bool(text: str) -> bool:
    """Ollama's envconfig.Bool: Go's strconv.ParseBool, and any other non-empty value is true."""
    return text not in PARSE_BOOL_FALSE


def _env_debug(text: str | None) -> bool:
    """OLLAMA_DEBUG as Ollama's LogLevel reads it: true as Go's ParseBool takes it, or a non-zero
    integer (2 is Ollama's trace level: debug here); anything else ("no", "off") is info."""
    if text is None or text in PARSE_BOOL_FALSE:
        return False
    if text in PARSE_BOOL_TRUE:
        return True
    try:
        return int(text) != 0
    except ValueError:
        return False


def _env_kv_cache_type(text: str | None) -> str:
    """OLLAMA_KV_CACHE_TYPE, case-insensitive; an unknown type is warned about and f16 used,
    as Ollama does ("unsupported OLLAMA_KV_CACHE_TYPE"): a typo must not stop the server."""
    if text is None:
        return DEFAULT_KV_CACHE_TYPE
    value = text.lower()
    if value not in KV_CACHE_TYPES:
        log.warning("unsupported OLLAMA_KV_CACHE_TYPE %r (one of %s): using f16", text, ", ".join(KV_CACHE_TYPES))
        return DEFAULT_KV_CACHE_TYPE
    return value


def _env_flash_attention(text: str | None) -> bool | None:
    """OLLAMA_FLASH_ATTENTION: None when unset (llama.cpp decides: its "auto"), else Ollama's
    envconfig.BoolWithDefault reading (a value ParseBool rejects counts as true)."""
    return None if text is None else _go_bool(text)


def _env_body_size(text: str | None) -> int:
    if text is None:
        return DEFAULT_MAX_BODY_SIZE
    try:
        return int(text)
    except ValueError as exc:
        raise ConfigError(f"invalid MAX_BODY_SIZE: {text!r} is not a number of bytes") from exc


def _env_gpu_overhead(text: str | None) -> int:
    """OLLAMA_GPU_OVERHEAD: bytes kept free on each GPU; as Ollama, a value that is no unsigned
    integer is a warning and 0."""
    if text is None:
        return 0
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        log.warning("invalid GPU_OVERHEAD %r: using 0", text)
        return 0
    return value


def _env_timeout(name: str, text: str | None, default: float) -> float:
    """Seconds, or a Go duration ("500ms"); it must be positive."""
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = parse_go_duration(text)
    if not seconds > 0:
        raise ConfigError(f"invalid {name}: {text!r} is not a positive duration")
    return seconds


def _env_load_timeout(text: str | None) -> float:
    """OLLAMA_LOAD_TIMEOUT as Ollama's envconfig.LoadTimeout reads it: a Go duration, else an integer
    of seconds, else (silently there, with a warning here) the default; zero or less: no limit."""
    if text is None:
        return DEFAULT_LOAD_TIMEOUT_S
    try:
        seconds = parse_go_duration(text)
    except ConfigError:
        try:
            seconds = float(int(text))
        except ValueError:
            log.warning("invalid LOAD_TIMEOUT %r: using the default 5m", text)
            return DEFAULT_LOAD_TIMEOUT_S
    return FOREVER if seconds <= 0 else seconds


def _env_registry_url(text: str | None) -> str:
    """``https://host[:port]`` or ``http://...``; a bare ``host[:port]`` means https."""
    if text is None:
        return DEFAULT_REGISTRY_URL
    url = text.rstrip("/")
    if "://" not in url:
        url = "https://" + url
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https") or not rest or "/" in rest:
        raise ConfigError(f"invalid REGISTRY_URL: {text!r} is not [http[s]://]host[:port]")
    return url


def _env_api_keys(text: str | None) -> tuple[str, ...]:
    """Comma-separated keys (so that one can be rotated in before the old one goes); blanks are dropped."""
    if text is None:
        return ()
    return tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))


@dataclass(frozen=True)
class Host:
    """Where the server listens, parsed as Ollama parses ``OLLAMA_HOST``."""

    scheme: str
    host: str
    port: int
    path: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        connect = host or "127.0.0.1"
        if self.host in ("0.0.0.0", "::"):
            connect = "127.0.0.1"
        return f"{self.scheme}://{connect}:{self.port}" + (f"/{self.path}" if self.path else "")


def parse_host(value: str) -> Host:
    """``[scheme://]host[:port][/path]`` with Ollama's defaults (envconfig.Host)."""
    s = value.strip().strip("\"'").strip()
    default_port = DEFAULT_PORT
    scheme, sep, hostport = s.partition("://")
    if not sep:
        scheme, hostport = "http", s
    elif scheme == "http":
        default_port = 80
    elif scheme == "https":
        default_port = 443
    hostport, _, path = hostport.partition("/")
    host: str
    port_text: str
    m = re.fullmatch(r"\[([^\]]*)\]:(.*)", hostport) or re.fullmatch(r"([^:\[\]]*):([^:]*)", hostport)
    if m:
        host, port_text = m.group(1), m.group(2)
    else:
        host, port_text = "127.0.0.1", str(default_port)
        bare = hostport.strip("[]")
        try:
            host = str(ipaddress.ip_address(bare))
        except ValueError:
            if hostport:
                host = hostport
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        port = default_port
    return Host(scheme=scheme, host=host, port=port, path=path)


def _default_models_dir() -> Path:
    return Path.home() / ".cllm" / "models"


def default_cache_dir(models_dir: Path) -> Path:
    """Saved prompt states live beside the model store (~/.cllm/prompt-cache by default)."""
    return models_dir.parent / "prompt-cache"


class EnvReader:
    """The environment as cllm reads it: each variable as ``CLLM_<NAME>`` first, else Ollama's
    ``OLLAMA_<NAME>``, quotes and blanks trimmed; an empty value is unset."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.ignored: set[str] = set()  # Ollama's variables set to what Ollama ignores (``get_int``)

    def get(self, name: str) -> str | None:
        for key in (f"CLLM_{name}", f"OLLAMA_{name}"):
            raw = self.env.get(key)
            if raw is not None and raw.strip().strip("\"'").strip() != "":
                return raw.strip().strip("\"'").strip()
        return None

    def get_bool(self, name: str) -> bool:
        """Set and true as Go's strconv.ParseBool reads it (Ollama's envconfig.Bool)."""
        raw = self.get(name)
        return raw is not None and _go_bool(raw)

    def get_int(
        self, name: str, default: int, minimum: int = 0, *, zero_is_default: bool = False, ollamas: bool = False
    ) -> int:
        """The variable as an integer of at least ``minimum``. 0 is a value like any other
        (CACHE_RAM=0 turns the cache off) unless ``zero_is_default``: where Ollama reads 0
        as "unset" (OLLAMA_MAX_QUEUE=0, OLLAMA_CONTEXT_LENGTH=0). cllm's own variables
        refuse a value that is no integer; Ollama's (``ollamas``: its envconfig.Uint) warn and take
        the default for one that is no unsigned integer, so a deployment Ollama ran still starts."""
        raw = self.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = None
        if ollamas and (value is None or value < 0):
            log.warning("invalid environment variable %s=%r: ignored, as Ollama ignores it", name, raw)
            self.ignored.add(name)
            return default
        if value is None:
            raise ConfigError(f"invalid {name}: {raw!r} is not an integer")
        if value == 0 and zero_is_default:
            return default
        return max(value, minimum)


@dataclass(frozen=True)
class Settings:
    """Every knob of the server; built by ``Settings.from_env`` or directly in tests."""

    host: Host = field(default_factory=lambda: parse_host(""))
    models_dir: Path = field(default_factory=_default_models_dir)
    keep_alive: float = DEFAULT_KEEP_ALIVE_S
    num_parallel: int = DEFAULT_NUM_PARALLEL
    # 0 (unset): as Ollama, 3 per GPU found, a CPU counting as one (``engine.pool.MODELS_PER_GPU``).
    max_loaded_models: int = 0
    max_queue: int = DEFAULT_MAX_QUEUE
    context_length: int = DEFAULT_CONTEXT_LENGTH
    # CLLM_CONTEXT_GROW: the largest context a too-long prompt may grow the loaded one to (0: never
    # grow, cut it). From the environment DEFAULT_CONTEXT_GROW unless OLLAMA_CONTEXT_LENGTH is set
    # (the operator's context wins); off for settings built in code (tests pick their contexts).
    context_grow: int = 0
    origins: tuple[str, ...] = ()
    # CLLM_API_KEY: the keys a request may carry (api/auth.py); none: no key is asked for, as in Ollama.
    # Out of repr so that printing the settings never shows one.
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    # The key the CLI sends: the first of CLLM_API_KEY, else OLLAMA_API_KEY (as ollama-python does).
    client_api_key: str | None = field(default=None, repr=False)
    # CLLM_METRICS_PUBLIC: GET /metrics needs no key (for scrapers that cannot send one).
    metrics_public: bool = False
    # Bytes a request body may have (POST /api/blobs excepted); 0 or less: no limit.
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    # OLLAMA_NOPRUNE: keep unreferenced blobs and stale partial downloads at start.
    noprune: bool = False
    # CLLM_LOCAL_STORE: the CLI's store commands (list, show, pull, push, create, cp, rm) work on
    # OLLAMA_MODELS directly when no server answers, instead of failing as ollama's do.
    local_store: bool = False
    # OLLAMA_NOHISTORY: `cllm run` sessions keep no history of the lines typed.
    nohistory: bool = False
    # OLLAMA_EDITOR: the editor `cllm run`'s Ctrl+G opens to compose a prompt ("": $VISUAL, $EDITOR, vi).
    editor: str = ""
    # OLLAMA_NO_CLOUD: only what GET /api/status reports as the source; cllm has no cloud to turn off.
    no_cloud: bool = False
    # cllm's own: llama.cpp threads (0 = one per physical core) and batch size.
    num_thread: int = 0
    num_batch: int = 512
    # Host RAM (MiB) for saved prompt states, so conversations that lost their slot come back
    # without recomputing their history (0: off). llama-server's --cache-ram default is 8192.
    cache_ram_mib: int = 4096
    # CLLM_CACHE_DIR and CLLM_CACHE_DISK (MiB, 0: off): saved prompt states on disk, under the
    # host-RAM ones, so an agent's long preamble outlives unloads and restarts. None: beside the
    # model store. 8 GiB holds ~100 states of a 6,600-token prompt of a small model.
    cache_dir: Path | None = None
    cache_disk_mib: int = 8192
    # A fixed cap on prompt tokens per decode step while other requests generate (0: none, the
    # step budget alone decides: engine/step_budget.py).
    prefill_chunk: int = 0
    # The inter-token latency (ms) the step budget keeps running streams to while prompts are
    # read beside them (0: twice a decode-only step as measured, at least 100 ms).
    target_itl_ms: int = 0
    # CLLM_GAP_FILL: the longest run of idle slots between generating ones that a decode step fills
    # with a throw-away row each, so that llama.cpp reads the weights once for the step
    # (engine/gap_fill.py); 0: none. A model wholly on GPUs takes the GPU value when it is unset.
    gap_fill: int = DEFAULT_GAP_FILL
    render_timeout: float = DEFAULT_RENDER_TIMEOUT_S
    # OLLAMA_LOAD_TIMEOUT: how long a model's load may go without progress before it is given up
    # (engine/load_stall.py); FOREVER: never. Settings made directly (tests) never give up.
    load_timeout: float = FOREVER
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE_S
    # CLLM_STREAM_KEEPALIVE: seconds (or a Go duration) between keep-alives of a quiet stream.
    stream_keepalive: float = DEFAULT_STREAM_KEEPALIVE_S
    # CLLM_LOAD_HEADERS: seconds (or a Go duration) a stream waits for its model's load before its
    # headers go out; a refusal after that ends the stream with an error object instead of a status.
    # 0: headers only once admitted. Settings made directly (tests) mean 0: statuses stay exact.
    load_headers: float = 0.0
    # The server behind registry.ollama.ai names (a mirror, or a test's stand-in).
    registry_url: str = DEFAULT_REGISTRY_URL
    # K and V cache element type of generation contexts: "f16", "q8_0" or "q4_0".
    kv_cache_type: str = DEFAULT_KV_CACHE_TYPE
    # Flash attention: True on, False off, None (unset): off for a model wholly on the CPU with an
    # f16 cache (engine/tuning.py: its CPU kernel decodes slower), else llama.cpp's "auto", which
    # turns it on itself on a GPU and where a quantized V cache needs it.
    flash_attention: bool | None = None
    # CLLM_DETERMINISTIC: batch-invariant decoding for every model (engine/invariance.py): a request's
    # tokens are bitwise the same whatever shares its steps, cold or cached; prefill ~30% slower.
    deterministic: bool = False
    # OLLAMA_GPU_OVERHEAD (bytes kept free on each GPU) and OLLAMA_SCHED_SPREAD (a model over every
    # GPU even where one holds it), as Ollama reads them: engine/offload.py fits layers with them.
    gpu_overhead: int = 0
    sched_spread: bool = False
    # CLLM_MAX_REQUEST_PIXELS, CLLM_MAX_DECODE_PIXELS, CLLM_MAX_AUDIO_SECONDS (engine/media_budget.py):
    # the pixels a request's images may add up to, the pixels being decoded at once across the
    # server, and how long a request's audio may last; 0: no limit (8192x8192 an image still).
    media: MediaLimits = field(default_factory=MediaLimits)
    # Catalog names (qwen3:0.6b...) from Ollama's registry first, the Hugging Face Hub if it lacks them.
    prefer_registry: bool = False
    debug: bool = False
    # Which of TUNABLE the environment left unset: cllm chooses those per device (engine/tuning.py).
    # Settings made directly (tests) leave none unset: what they say is what loads.
    unset: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.cache_dir is None:
            object.__setattr__(self, "cache_dir", default_cache_dir(self.models_dir))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = EnvReader(os.environ if env is None else env)
        models, keep_alive, origins = e.get("MODELS"), e.get("KEEP_ALIVE"), e.get("ORIGINS")
        context_length = e.get_int("CONTEXT_LENGTH", 0, ollamas=True)  # 0: unset, as Ollama reads it
        # Only CLLM_API_KEY turns the check on: OLLAMA_API_KEY holds an ollama.com account key in
        # Ollama users' shells, and Ollama's server never reads it. Clients may send it, though.
        api_keys = _env_api_keys(e.env.get("CLLM_API_KEY"))
        client_keys = api_keys or _env_api_keys(e.env.get("OLLAMA_API_KEY"))
        return cls(
            host=parse_host(e.get("HOST") or ""),
            models_dir=_env_path(models) if models else _default_models_dir(),
            keep_alive=_env_keep_alive(keep_alive) if keep_alive else DEFAULT_KEEP_ALIVE_S,
            num_parallel=e.get_int("NUM_PARALLEL", DEFAULT_NUM_PARALLEL, minimum=1, ollamas=True),
            max_loaded_models=e.get_int("MAX_LOADED_MODELS", 0, ollamas=True),
            max_queue=e.get_int("MAX_QUEUE", DEFAULT_MAX_QUEUE, zero_is_default=True, ollamas=True),
            context_length=context_length or DEFAULT_CONTEXT_LENGTH,
            # The operator's OLLAMA_CONTEXT_LENGTH wins: nothing grows past it unless asked to.
            context_grow=e.get_int("CONTEXT_GROW", 0 if context_length else DEFAULT_CONTEXT_GROW),
            origins=tuple(o.strip() for o in origins.split(",") if o.strip()) if origins else (),
            api_keys=api_keys,
            client_api_key=client_keys[0] if client_keys else None,
            metrics_public=e.get_bool("METRICS_PUBLIC"),
            num_thread=e.get_int("NUM_THREAD", 0),
            num_batch=e.get_int("NUM_BATCH", 512, minimum=1),
            cache_ram_mib=e.get_int("CACHE_RAM", 4096),
            cache_dir=_env_path(cache_dir) if (cache_dir := e.get("CACHE_DIR")) else None,
            cache_disk_mib=e.get_int("CACHE_DISK", 8192),
            prefill_chunk=e.get_int("PREFILL_CHUNK", 0),
            target_itl_ms=e.get_int("TARGET_ITL", 0),
            gap_fill=e.get_int("GAP_FILL", DEFAULT_GAP_FILL),
            render_timeout=_env_timeout("RENDER_TIMEOUT", e.get("RENDER_TIMEOUT"), DEFAULT_RENDER_TIMEOUT_S),
            shutdown_grace=_env_timeout("SHUTDOWN_GRACE", e.get("SHUTDOWN_GRACE"), DEFAULT_SHUTDOWN_GRACE_S),
            stream_keepalive=_env_timeout("STREAM_KEEPALIVE", e.get("STREAM_KEEPALIVE"), DEFAULT_STREAM_KEEPALIVE_S),
            load_headers=_env_timeout("LOAD_HEADERS", e.get("LOAD_HEADERS"), DEFAULT_LOAD_HEADERS_S),
            load_timeout=_env_load_timeout(e.get("LOAD_TIMEOUT")),
            debug=_env_debug(e.get("DEBUG")),
            max_body_size=_env_body_size(e.get("MAX_BODY_SIZE")),
            noprune=e.get_bool("NOPRUNE"),
            local_store=e.get_bool("LOCAL_STORE"),
            nohistory=e.get_bool("NOHISTORY"),
            editor=(e.get("EDITOR") or "").strip(),
            no_cloud=e.get_bool("NO_CLOUD"),
            registry_url=_env_registry_url(e.get("REGISTRY_URL")),
            kv_cache_type=_env_kv_cache_type(e.get("KV_CACHE_TYPE")),
            flash_attention=_env_flash_attention(e.get("FLASH_ATTENTION")),
            deterministic=e.get_bool("DETERMINISTIC"),
            gpu_overhead=_env_gpu_overhead(e.get("GPU_OVERHEAD")),
            sched_spread=e.get_bool("SCHED_SPREAD"),
            prefer_registry=e.get_bool("PREFER_REGISTRY"),
            media=MediaLimits(
                request_pixels=e.get_int("MAX_REQUEST_PIXELS", DEFAULT_REQUEST_PIXELS),
                server_pixels=e.get_int("MAX_DECODE_PIXELS", DEFAULT_SERVER_PIXELS),
                audio_seconds=e.get_int("MAX_AUDIO_SECONDS", DEFAULT_AUDIO_SECONDS),
            ),
            unset=frozenset(name for name, var in TUNABLE.items() if e.get(var) is None or var in e.ignored),
        )
