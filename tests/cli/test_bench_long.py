"""bench/compare.py --workload long: the same llama.cpp settings on both targets, what each depth
sends, the report's rates; and the report's parts (distinct, prefix, agent, long) rewritten alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import benchfake
from benchfake import FakeServer, invoke_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # compare.py's siblings are top-level

import compare
import report
import report_long

fake = benchfake.fake  # the fixture: a fake server and its URL


def test_long_runs_only_when_named_with_the_same_settings_on_both_targets(tmp_path: Path) -> None:
    assert compare.parse_args([])[0].long is None  # "all" leaves it out
    plan, _ = compare.parse_args(["--workload", "long", "--out", str(tmp_path)])
    assert plan.long is not None and plan.prefix is not None  # the real model is needed
    assert plan.long.depths == (16384, 32768) and plan.long.ctx == 32768
    assert plan.long.prompt_tokens(32768) + plan.long.max_tokens < 32768  # the answer fits
    (cllm, _), (server, _) = compare.long_outcomes(plan, Path("/bin/llama-server"), Path("/m"), tmp_path)
    env = cllm.server.shown_env
    assert (env["CLLM_NUM_PARALLEL"], env["CLLM_CONTEXT_LENGTH"], env["CLLM_NUM_THREAD"]) == ("1", "32768", "2")
    assert (env["OLLAMA_FLASH_ATTENTION"], env["OLLAMA_KV_CACHE_TYPE"], env["CLLM_NUM_BATCH"]) == ("1", "f16", "2048")
    argv = server.server.argv

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert [flag(f) for f in ("-np", "-c", "-t", "-fa", "-ctk", "-ctv", "-b", "-ub")] == [
        "1", "32768", "2", "on", "f16", "f16", "2048", "512"
    ]  # fmt: skip
    # A cold 32k-token prefill on two cores outlasts cllm bench's default 600 s per request.
    assert all(o.bench[o.bench.index("--timeout") + 1] == "1800" for o in (cllm, server))
    off, _ = compare.parse_args(["--workload", "long", "--flash-attention", "off", "--out", str(tmp_path)])
    (cllm, _), (server, _) = compare.long_outcomes(off, Path("/bin/llama-server"), Path("/m"), tmp_path)
    assert cllm.server.shown_env["OLLAMA_FLASH_ATTENTION"] == "0" and "off" in server.server.argv


def test_each_depth_sends_a_cold_prompt_of_its_size_after_a_short_warm_up(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    server, url = fake
    plan, _ = compare.parse_args(["--workload", "long", "--quick", "--out", str(tmp_path)])
    assert plan.long is not None
    outcomes = compare.long_outcomes(plan, Path("/bin/llama-server"), Path("/m"), tmp_path)
    cllm = outcomes[0][0]
    out = tmp_path / "long.json"
    args = [a if a != cllm.server.base_url else url for a in cllm.bench]
    invoke_bench(*args, "--prompt-tokens", str(plan.long.prompt_tokens(2048)), "--json", str(out))
    warm_up, *measured = server.bodies
    assert len(warm_up["prompt"].split()) <= 16
    assert len(measured) == plan.long.requests
    size = plan.long.prompt_tokens(2048)  # words, each a token, after a number and a colon
    assert all(size - 3 <= len(b["prompt"].split()) <= size for b in measured)
    assert len({b["prompt"] for b in measured}) == len(measured)  # distinct: nothing cached
    assert measured[0]["options"]["num_predict"] == plan.long.max_tokens
    level = json.loads(out.read_text())["levels"][0]
    assert level["decode_tokens_per_s"] > 0  # tokens after the first over the time after it


def _level(prompt: float, ttft_ms: float, decode: float) -> dict[str, object]:
    return {"requests": 2, "errors": 0, "prompt_tokens_mean": prompt, "ttft_ms": {"p50": ttft_ms},
            "decode_tokens_per_s": decode, "generated_tokens": 256}  # fmt: skip


def test_the_long_report_gives_prefill_and_decode_rates_and_their_ratios(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 1024)
    plan, _ = compare.parse_args(["--workload", "long", "--out", str(tmp_path), "--report", str(tmp_path / "B.md")])
    outcomes = [o for o, _ in compare.long_outcomes(plan, Path("/bin/llama-server"), Path("/m"), tmp_path)]
    results = {
        "cllm": {16384: {"levels": [_level(16192, 80000.0, 20.0)]}, 32768: {"levels": [_level(32576, 200000.0, 15.0)]}},
        "llama-server": {16384: {"levels": [_level(16192, 64000.0, 25.0)]}},
    }
    text = "\n".join(report_long.long_report(plan, model, outcomes, results, ["cllm 0.1.0"]))
    assert "| 16384 | cllm (1 slot) | 16192 | 80000 | 202.4 | 20.0 | 256 | 0 / 2 |" in text
    assert "| 32768 | llama-server -np 1 | – | – | – | – | – | – |" in text
    assert "- 16384 tokens, cllm / llama-server: prefill 0.80, decode 0.80 (target ≥ 1.00)." in text
    assert "- 32768 tokens, cllm / llama-server: prefill –, decode –" in text
    assert "--prompt-tokens 32576" in text and "-fa on" in text


def test_every_part_of_the_report_is_rewritten_alone(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    report.write(path, ["# Benchmarks", "", "distinct 1"], ["## Prefix", "chat 1"])
    report.write(path, None, None, {"long": ["## Long", "long 1"]})
    report.write(path, None, None, {"agent": ["## Agent", "agent 1"], "long": None})
    text = path.read_text()
    assert all(part in text for part in ("distinct 1", "chat 1", "agent 1", "long 1"))
    # In a fixed order whatever ran last: distinct, prefix, agent, long.
    assert text.index("chat 1") < text.index("agent 1") < text.index("long 1")
    report.write(path, None, ["## Prefix", "chat 2"], {"agent": ["## Agent", "agent 2"]})
    text = path.read_text()
    assert "chat 1" not in text and "agent 1" not in text and "long 1" in text and "distinct 1" in text
    assert text.count(report.markers("agent")[0]) == 1 and text.count(report.markers("long")[1]) == 1
