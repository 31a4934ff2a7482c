"""GET /metrics: Prometheus text, with vLLM's names where an inference gateway reads them.

The Gateway API Inference Extension's endpoint picker routes on the Model Server Protocol's
gauges (``vllm:num_requests_waiting``, ``vllm:num_requests_running``,
``vllm:kv_cache_usage_perc``, ``vllm:cache_config_info``). They are read from the pool only
when someone scrapes; the counters and histograms cost a few microseconds per request and
per token as requests go. Every series of a model carries ``model_name``, as vLLM's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...engine.frontdoor import PREFIX_BLOCK, Occupancy
from ...engine.pool import ModelPool
from ...engine.request import Stats

# The ``*_created`` timestamps double the series and no dashboard reads them (vLLM drops them too).
disable_created_metrics()

_NOTHING = Occupancy(running=0, waiting=0, cells_used=0, cells_total=0)

# vLLM's buckets, so that dashboards built for it read cllm's histograms the same way.
# fmt: off
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0)
_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                    240.0, 480.0, 960.0, 1920.0, 7680.0)
# fmt: on


class ServerMetrics:
    """The server's own registry (not the process-global one: each app counts for itself)."""

    def __init__(self, pool: Callable[[], ModelPool | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.http_requests = Counter(
            "cllm_http_requests",
            "HTTP requests by route, method and status.",
            ["endpoint", "method", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "cllm_prompt_tokens",
            "Prompt tokens of finished generations, by whether their KV was computed or reused (cached).",
            ["model_name", "source"],
            registry=r,
        )
        self.vllm_prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens processed.", ["model_name"], registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Tokens generated.", ["model_name"], registry=r)
        self.finished = Counter(
            "vllm:request_success", "Generations finished, by why.", ["model_name", "finished_reason"], registry=r
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "From the request's arrival to its first generated token.",
            ["model_name"],
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Between two tokens of one generation, as its client receives them.",
            ["model_name"],
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.queue = Histogram(
            "vllm:request_queue_time_seconds",
            "Waiting for a slot: from reaching the model's queue to admission.",
            ["model_name"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "From the request's arrival to its last token.",
            ["model_name"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        r.register(PoolCollector(pool))

    def generation(self, model_name: str, t_start_ns: int) -> GenerationMeter:
        return GenerationMeter(self, model_name, t_start_ns)

    def response(self) -> Response:
        """Prometheus's text format, whatever the scraper's Accept header says.

        prometheus_client's OpenMetrics writer escapes the colons out of sample names but not out
        of their HELP and TYPE lines, so a Prometheus that asks for it would store
        ``vllm_num_requests_waiting``; the text format keeps vLLM's names, and every scraper
        (Prometheus, the endpoint picker's Go parser) reads it.
        """
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_PLAIN_0_0_4)


class GenerationMeter:
    """One generation's observations: first token, each next one, and its end.

    The model's labelled series are looked up once here, not per token.
    """

    __slots__ = ("_itl", "_last", "_metrics", "_model", "_start")

    def __init__(self, metrics: ServerMetrics, model_name: str, t_start_ns: int) -> None:
        self._metrics, self._model, self._start, self._last = metrics, model_name, t_start_ns, 0
        self._itl = metrics.itl.labels(model_name)

    def tokens(self) -> None:
        now = time.perf_counter_ns()
        if self._last:
            self._itl.observe((now - self._last) / 1e9)
        else:
            self._metrics.ttft.labels(self._model).observe((now - self._start) / 1e9)
        self._last = now

    def finish(self, reason: str, stats: Stats | None) -> None:
        m, model = self._metrics, self._model
        m.finished.labels(model, reason).inc()
        m.e2e.labels(model).observe((time.perf_counter_ns() - self._start) / 1e9)
        if stats is None:
            return
        m.queue.labels(model).observe(stats.queue_ns / 1e9)
        m.vllm_prompt_tokens.labels(model).inc(stats.prompt_tokens)
        m.prompt_tokens.labels(model, "computed").inc(stats.prompt_tokens - stats.prompt_cached)
        m.prompt_tokens.labels(model, "cached").inc(stats.prompt_cached)
        m.generation_tokens.labels(model).inc(stats.eval_tokens)


def _add(a: Occupancy, b: Occupancy) -> Occupancy:
    return Occupancy(
        a.running + b.running, a.waiting + b.waiting, a.cells_used + b.cells_used, a.cells_total + b.cells_total
    )


class PoolCollector(Collector):
    """The gauges, read from the pool at scrape time: nothing is kept up to date between scrapes.

    ``vllm:num_requests_waiting`` counts requests a model has accepted (their prompt rendered)
    that hold no slot yet, plus those waiting for the model to load; ``running`` those in a
    slot, whether prefilling, generating or paused for a slow reader. The KV usage is the
    fraction of cells the running requests hold: prefixes kept in idle slots for reuse can be
    overwritten at any time, so they count as free (vLLM counts its cached blocks the same way).
    """

    def __init__(self, pool: Callable[[], ModelPool | None]) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        pool = self._pool()
        rows: dict[str, tuple[Occupancy, int]] = {}
        loads: dict[str, int] = {}
        unloads: dict[str, int] = {}
        if pool is not None:
            for entry in pool.running():
                # Two files can be loaded under one name (a model re-created while in use): add up.
                now, n_slots = rows.get(entry.name, (_NOTHING, 0))
                rows[entry.name] = (_add(now, entry.model.occupancy()), n_slots + entry.model.n_slots)
            for name, n in pool.waiting_for_load.items():
                occupancy, n_slots = rows.get(name, (_NOTHING, 0))
                rows[name] = (replace(occupancy, waiting=occupancy.waiting + n), n_slots)
            loads, unloads = dict(pool.loads), dict(pool.unloads)
        if not rows:
            # A gateway reads these families from every pod: present them even with nothing loaded.
            rows[""] = (_NOTHING, 0)
        running = GaugeMetricFamily("vllm:num_requests_running", "Requests in a slot.", labels=["model_name"])
        waiting = GaugeMetricFamily(
            "vllm:num_requests_waiting", "Requests queued for a slot or for their model's load.", labels=["model_name"]
        )
        usage = GaugeMetricFamily(
            "vllm:kv_cache_usage_perc", "Fraction of KV cells held by running requests (0-1).", labels=["model_name"]
        )
        slots = GaugeMetricFamily("cllm_slots", "Parallel sequences (slots) of a loaded model.", labels=["model_name"])
        config = GaugeMetricFamily(
            "vllm:cache_config_info",
            "The KV cache's layout: tokens per block and blocks in all (labels).",
            labels=["model_name", "block_size", "num_gpu_blocks"],
        )
        for name, (occupancy, n_slots) in sorted(rows.items()):
            running.add_metric([name], occupancy.running)
            waiting.add_metric([name], occupancy.waiting)
            total = occupancy.cells_total
            usage.add_metric([name], occupancy.cells_used / total if total else 0.0)
            if name:
                slots.add_metric([name], n_slots)
            if total:
                config.add_metric([name, str(PREFIX_BLOCK), str(total // PREFIX_BLOCK)], 1.0)
        yield from (running, waiting, usage, config, slots)
        loaded = CounterMetricFamily("cllm_model_loads", "Models loaded.", labels=["model_name"])
        for name, n in sorted(loads.items()):
            loaded.add_metric([name], n)
        unloaded = CounterMetricFamily("cllm_model_unloads", "Models unloaded.", labels=["model_name"])
        for name, n in sorted(unloads.items()):
            unloaded.add_metric([name], n)
        yield from (loaded, unloaded)


# uvicorn's h11 parser takes any token as a method: the label keeps only HTTP's own.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"})


class RequestCounter:
    """Counts every HTTP request by its route's path and its method (not the raw ones: a client
    must not be able to create a series per URL or per made-up method) and status; a client gone
    before any answer counts as 499."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], metrics: ServerMetrics) -> None:
        self.app, self._routes, self._counter = app, routes, metrics.http_requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 499

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if status == 499:  # nothing was sent: the server's own error handler answers 500
                status = 500
            raise
        finally:
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self._counter.labels(self._endpoint(scope), method, str(status)).inc()

    def _endpoint(self, scope: Scope) -> str:
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return getattr(route, "path", "other")
        for route in self._routes:  # the right path with another method (a 405)
            match, _ = route.matches(scope)
            if match is Match.PARTIAL:
                return getattr(route, "path", "other")
        return "other"
