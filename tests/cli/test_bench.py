"""``cllm bench``: statistics on hand-made timings, prompts, and whole runs against a fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchfake import CHUNKS, EVAL_COUNT, PROMPT_EVAL_COUNT, FakeServer, serving
from click.testing import CliRunner
from cllm_ollama.cli.bench import bench_command, parse_levels
from cllm_ollama.cli.bench_client import Api, Target, parse_chunk, request_body
from cllm_ollama.cli.bench_stats import RequestTiming, make_prompt, percentile, summarize

from cllm_ollama.api.middleware.auth import ApiKeyRequired

# ---------------------------------------------------------------- statistics


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile([1.0, 2.0, 3.0, 4.0], 0) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None


def test_summarize_aggregates_tokens_over_the_level_wall_time() -> None:
    timings = [
        RequestTiming(start=10.0, end=10.35, chunk_times=[10.1, 10.2, 10.3], tokens=3, prompt_tokens=60),
        RequestTiming(start=10.0, end=10.5, chunk_times=[10.2, 10.4], prompt_tokens=64),  # no server count
        RequestTiming(start=10.1, end=10.2, chunk_times=[10.15], tokens=9, error="HTTP 500: boom"),
    ]
    s = summarize(2, timings)
    assert (s.concurrency, s.requests, s.ok, s.errors) == (2, 3, 2, 1)
    assert s.wall_s == pytest.approx(0.5)
    assert s.generated_tokens == 5  # 3 reported + 2 counted chunks; the failed request counts nothing
    assert s.tokens_per_s == pytest.approx(10.0)
    assert s.requests_per_s == pytest.approx(4.0)
    assert s.ttft_ms["p50"] == pytest.approx(150.0)
    assert s.ttft_ms["mean"] == pytest.approx(150.0)
    # gaps 0.1, 0.1 (first request) and 0.2 (second)
    assert s.itl_ms["p50"] == pytest.approx(100.0)
    assert s.itl_ms["p95"] == pytest.approx(190.0)
    assert s.prompt_tokens_mean == pytest.approx(62.0)
    assert s.error_samples == ["HTTP 500: boom"]


def test_summarize_of_only_failures_reports_no_latencies() -> None:
    s = summarize(1, [RequestTiming(start=0.0, end=1.0, error="ConnectError: refused")])
    assert (s.ok, s.errors, s.generated_tokens, s.tokens_per_s) == (0, 1, 0, 0.0)
    assert s.ttft_ms == {"p50": None, "p95": None, "p99": None, "mean": None}


# ---------------------------------------------------------------- prompts and wire formats


def test_prompts_are_deterministic_distinct_and_about_the_asked_length() -> None:
    assert make_prompt(64, 3, seed=1) == make_prompt(64, 3, seed=1)
    assert make_prompt(64, 3, seed=1) != make_prompt(64, 3, seed=2)
    prompts = [make_prompt(64, i) for i in range(500)]
    assert len(set(prompts)) == 500
    # distinct from the first word on, so no prompt cache can reuse another request's prefill
    assert len({p.split()[0] for p in prompts}) == 500
    assert 60 <= len(prompts[0].split()) <= 64


def test_parse_levels() -> None:
    assert parse_levels("1, 4,8") == [1, 4, 8]
    with pytest.raises(Exception, match="positive"):
        parse_levels("0,4")
    with pytest.raises(Exception, match="integers"):
        parse_levels("1,x")


def test_request_bodies_ask_for_a_fixed_greedy_length() -> None:
    gen = request_body(Target("http://x", Api.GENERATE, "m", max_tokens=9, seed=5), "hi")
    assert gen["options"] == {"num_predict": 9, "temperature": 0, "seed": 5, "stop": []}
    assert gen["stream"] is True and gen["raw"] is True and gen["prompt"] == "hi"
    chat = request_body(Target("http://x", Api.CHAT, "m"), "hi")
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    oai = request_body(Target("http://x", Api.OPENAI_COMPLETIONS, "m", max_tokens=9), "hi")
    assert oai["max_tokens"] == 9 and oai["ignore_eos"] is True and oai["temperature"] == 0
    assert oai["stream_options"] == {"include_usage": True}
    assert "ignore_eos" not in request_body(Target("http://x", Api.OPENAI_CHAT, "m", ignore_eos=False), "hi")


def test_parse_chunk_reads_text_counts_and_errors() -> None:
    assert parse_chunk(Api.GENERATE, {"response": "a", "done": False}).text == "a"
    done = parse_chunk(Api.GENERATE, {"response": "", "done": True, "eval_count": 4, "prompt_eval_count": 2})
    assert (done.text, done.tokens, done.prompt_tokens, done.done) == ("", 4, 2, True)
    assert parse_chunk(Api.CHAT, {"message": {"role": "assistant", "thinking": "t"}}).text == "t"
    assert parse_chunk(Api.CHAT, {"error": "model not found"}).error == "model not found"
    assert parse_chunk(Api.OPENAI_COMPLETIONS, {"choices": [{"text": "x"}]}).text == "x"
    assert parse_chunk(Api.OPENAI_CHAT, {"choices": [{"delta": {"content": "y"}}]}).text == "y"
    usage = parse_chunk(Api.OPENAI_CHAT, {"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 8}})
    assert (usage.tokens, usage.prompt_tokens) == (3, 8)
    assert parse_chunk(Api.OPENAI_CHAT, {"error": {"message": "bad"}}).error == "bad"


# ---------------------------------------------------------------- end to end against a fake server


@pytest.fixture
def fake() -> Iterator[tuple[FakeServer, str]]:
    server = FakeServer()
    with serving(server) as url:
        yield server, url


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(bench_command, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def test_bench_generate_reports_server_counts_and_writes_json(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    server, url = fake
    out = tmp_path / "r.json"
    result = _invoke(
        "--url", url, "--model", "m", "--concurrency", "1,6", "--prompt-tokens", "16",
        "--max-tokens", "5", "--label", "fake", "--json", str(out),
    )  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["label"] == "fake"
    assert doc["target"] == {"url": url, "api": "generate", "model": "m"}
    assert doc["settings"]["prompt_tokens"] == 16 and doc["settings"]["max_tokens"] == 5
    levels = doc["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 6]
    assert [lv["requests"] for lv in levels] == [8, 12]  # default: twice the level, at least 8
    for lv in levels:
        assert lv["ok"] == lv["requests"] and lv["errors"] == 0
        assert lv["generated_tokens"] == lv["requests"] * EVAL_COUNT
        assert lv["tokens_per_s"] == pytest.approx(lv["generated_tokens"] / lv["wall_s"])
        assert lv["requests_per_s"] == pytest.approx(lv["requests"] / lv["wall_s"])
        assert lv["prompt_tokens_mean"] == PROMPT_EVAL_COUNT
        assert 0 < lv["ttft_ms"]["p50"] <= lv["ttft_ms"]["p95"]
        assert 0 <= lv["itl_ms"]["p50"] <= lv["itl_ms"]["p95"]
    # one warm-up + 20 measured requests, every prompt different, all greedy and fixed-length
    assert len(server.bodies) == 21
    assert len({b["prompt"] for b in server.bodies}) == 21
    assert all(b["options"]["num_predict"] == 5 and b["options"]["temperature"] == 0 for b in server.bodies)
    lines = result.output.splitlines()
    assert lines[1].split()[:2] == ["conc", "reqs"]
    assert [row.split()[:4] for row in lines[2:4]] == [["1", "8", "8", "0"], ["6", "12", "12", "0"]]


def test_bench_keeps_the_asked_concurrency_in_flight(fake: tuple[FakeServer, str]) -> None:
    server, url = fake
    _invoke("--url", url, "--model", "gate-4", "--api", "chat", "-c", "4", "-n", "4", "--warmup", "0")
    assert server.peak == 4
    assert len(server.bodies) == 4


def test_bench_counts_chunks_without_usage(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    _, url = fake
    out = tmp_path / "o.json"
    _invoke("--url", url, "--model", "m", "--api", "openai-completions", "-c", "3", "-n", "1", "--json", str(out))
    (level,) = json.loads(out.read_text())["levels"]
    assert level["requests"] == 3  # never fewer requests than the level
    assert level["generated_tokens"] == 3 * CHUNKS
    assert level["prompt_tokens_mean"] is None


def test_bench_fails_fast_when_the_warm_up_fails(fake: tuple[FakeServer, str]) -> None:
    _, url = fake
    result = CliRunner().invoke(bench_command, ["--url", url, "--model", "missing", "-c", "1"])
    assert result.exit_code == 1
    assert "warm-up request failed: HTTP 404" in result.output


def test_bench_counts_errors_per_level(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    _, url = fake
    out = tmp_path / "e.json"
    _invoke("--url", url, "--model", "missing", "-c", "2", "--warmup", "0", "--json", str(out))
    (level,) = json.loads(out.read_text())["levels"]
    assert (level["ok"], level["errors"], level["generated_tokens"]) == (0, 8, 0)
    assert level["error_samples"] == ['HTTP 404: {"error":"model \'missing\' not found"}']


def test_bench_sends_the_key_from_the_environment() -> None:
    server = FakeServer()
    server.app.add_middleware(ApiKeyRequired, keys=("bench-key",))
    with serving(server) as url:
        args = ["--url", url, "--model", "m", "-c", "2", "-n", "2"]
        result = CliRunner().invoke(bench_command, args, env={"CLLM_API_KEY": "bench-key", "OLLAMA_API_KEY": None})
        assert result.exit_code == 0, result.output
        assert len(server.bodies) == 3
        result = CliRunner().invoke(bench_command, args, env={"CLLM_API_KEY": None, "OLLAMA_API_KEY": None})
        assert result.exit_code == 1 and "warm-up request failed: HTTP 401" in result.output
    assert "bench-key" not in repr(Target(url, Api.GENERATE, "m", api_key="bench-key"))


def test_bench_counts_a_cut_stream_as_an_error(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    _, url = fake
    out = tmp_path / "t.json"
    _invoke("--url", url, "--model", "truncated", "-c", "1", "-n", "8", "--warmup", "0", "--json", str(out))
    (level,) = json.loads(out.read_text())["levels"]
    assert (level["ok"], level["errors"]) == (0, 8)
    assert level["error_samples"] == ["stream ended before its end marker"]


def test_plot_combines_results(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    level = {"concurrency": 1, "tokens_per_s": 10.0, "ttft_ms": {"p50": 5.0}}
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"label": name, "levels": [level, level | {"concurrency": 4}]}))
        paths.append(str(path))
    png = tmp_path / "p.png"
    _invoke("plot", *paths, "-o", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("api", ["embed", "openai-embeddings"])
def test_bench_embeddings_reports_inputs_per_second(fake: tuple[FakeServer, str], tmp_path: Path, api: str) -> None:
    server, url = fake
    out = tmp_path / "r.json"
    result = _invoke(
        "--url", url, "--api", api, "--model", "m", "-c", "1,4", "-n", "4", "--inputs", "3", "--json", str(out)
    )
    levels = json.loads(out.read_text())["levels"]
    assert [(lv["requests"], lv["ok"]) for lv in levels] == [(4, 4), (4, 4)]
    for lv in levels:
        assert lv["generated_tokens"] == 4 * 3  # inputs embedded: the rate is inputs/s
        assert lv["tokens_per_s"] == pytest.approx(12 / lv["wall_s"])
        assert lv["prompt_tokens_mean"] == 3 * PROMPT_EVAL_COUNT
    assert result.output.splitlines()[1].split()[4] == "in/s"
    texts = [t for body in server.bodies for t in body["input"]]
    assert len(server.bodies) == 9 and len(set(texts)) == 27  # a warm-up, then distinct texts only
