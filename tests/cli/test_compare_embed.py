"""bench/compare.py's embed workload (issue 20): its plan, the targets it starts, the bench arguments
(run against a fake server) and its section of the report, kept when other parts are rewritten."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from benchfake import FakeServer, serving
from click.testing import CliRunner
from cllm_ollama.cli.bench import bench_command

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # compare.py imports its siblings as top-level modules

import compare  # noqa: E402
import embed  # noqa: E402
import report  # noqa: E402
from plan import Outcome  # noqa: E402
from targets import Server  # noqa: E402


def test_embed_runs_only_when_named_at_one_and_eight_clients() -> None:
    assert compare.parse_args([])[0].embed is None
    plan, _ = compare.parse_args(["--workload", "embed"])
    assert plan.workloads == ("embed",) and plan.embed is not None and plan.prefix is None
    assert (plan.embed.slots, plan.embed.levels, plan.embed.requests, plan.embed.inputs) == (8, (1, 8), 64, 1)
    assert compare.parse_args(["--workload", "embed", "--quick"])[0].embed.requests == 4  # type: ignore[union-attr]
    assert compare.needs_tools(plan)


def test_the_targets_are_cllm_and_llama_server_embeddings_np8_and_np1(tmp_path: Path) -> None:
    plan, _ = compare.parse_args(["--workload", "embed", "--cache", str(tmp_path), "--out", str(tmp_path / "out")])
    found = compare.embed_outcomes(plan, Path("/bin/llama-server"), Path("/e.gguf"), tmp_path)
    ran = [o for o, _ in found]
    assert [o.label for o in ran] == [
        "cllm (8 slots)",
        "llama-server --embeddings -np 8",
        "llama-server --embeddings -np 1",
    ]
    cllm, np8, np1 = (o.server for o in ran)
    assert cllm.shown_env["CLLM_NUM_PARALLEL"] == "8"
    assert "--embeddings" in np8.argv and np8.argv[np8.argv.index("-np") + 1] == "8"
    assert "--embeddings" in np1.argv and np1.argv[np1.argv.index("-np") + 1] == "1"
    assert [o.bench[o.bench.index("--api") + 1] for o in ran] == ["embed", "openai-embeddings", "openai-embeddings"]
    assert ran[0].bench[ran[0].bench.index("--concurrency") + 1] == "1,8"
    assert ran[1].bench[-1] == str(tmp_path / "out" / "embed" / "llama-server.json")


@pytest.mark.parametrize("api", ["embed", "openai-embeddings"])
def test_the_bench_arguments_run(tmp_path: Path, api: str) -> None:
    plan, _ = compare.parse_args(["--workload", "embed", "--quick", "--embed-inputs", "2"])
    assert plan.embed is not None
    out = tmp_path / "r.json"
    with serving(FakeServer()) as url:
        result = CliRunner().invoke(bench_command, plan.embed.bench_args(url, api, "x", out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 8]
    assert all(lv["errors"] == 0 and lv["generated_tokens"] == 2 * lv["requests"] for lv in doc["levels"])


def _outcome(name: str, label: str, rates: dict[int, float]) -> Outcome:
    server = Server(name, [name, "--port", "1234"], "http://127.0.0.1:1234", "/health", Path("log"))
    outcome = Outcome(name, server, ["--url", "http://127.0.0.1:1234"], workload="embed", label=label)
    levels = [{"concurrency": c, "tokens_per_s": r, "errors": 0, "requests": 64} for c, r in rates.items()]
    outcome.result = {"label": label, "levels": levels}
    outcome.peak_rss_kib = 1024 * 1024
    return outcome


def test_the_report_gives_inputs_per_second_and_the_issue_s_ratios(tmp_path: Path) -> None:
    plan, _ = compare.parse_args(["--workload", "embed"])
    assert plan.embed is not None
    model = tmp_path / "e.gguf"
    model.write_bytes(b"x" * 1024)
    outcomes = [
        _outcome("cllm", "cllm (8 slots)", {1: 40.0, 8: 200.0}),
        _outcome("llama-server", "llama-server --embeddings -np 8", {1: 42.0, 8: 160.0}),
        _outcome("llama-server-np1", "llama-server --embeddings -np 1", {1: 42.0, 8: 50.0}),
    ]
    text = "\n".join(embed.report(plan, plan.embed, model, outcomes, ["cllm 0.1.0"]))
    assert "| cllm (8 slots) | 40.0 | 200.0 | 0 | 1024 |" in text
    assert "- inputs/s at 8 clients, cllm / llama-server --embeddings -np 8: 1.25 (target ≥ 1.00)" in text
    assert "- inputs/s at 8 clients, cllm / llama-server --embeddings -np 1: 4.00 (target several times)" in text
    assert "--port PORT" in text and "--url http://127.0.0.1:PORT" in text


def test_the_embed_section_survives_the_other_parts_being_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    report.write(path, ["# Benchmarks", "", "distinct 1"], ["## Prefix", "chat 1"])
    embed.write(path, ["## Embeddings", "embed 1"], embed.section(path))
    for distinct, prefix, lines in ((["# Benchmarks", "distinct 2"], None, None), (None, ["chat 2"], None)):
        kept = embed.section(path)
        report.write(path, distinct, prefix)
        embed.write(path, lines, kept)
    embed.write(path, ["## Embeddings", "embed 2"], embed.section(path))
    text = path.read_text()
    assert "distinct 2" in text and "chat 2" in text and "embed 2" in text
    assert "embed 1" not in text and text.count(embed.BEGIN) == 1 and text.rstrip().endswith(embed.END)
