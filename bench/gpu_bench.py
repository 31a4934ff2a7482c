"""The steps of ``bench/gpu_check.sh`` that are Python: the bench model, cllm against
``llama-server -np N`` and ``-np 1`` (how Ollama runs it by default), a partly offloaded load,
and llama-batched-bench as the ceiling. Each writes its results under ``--out`` as it goes.

``f16`` writes the random-weight model in F16 without llama.cpp (so it can run while llama.cpp
builds); ``model`` quantizes it (through the binding, once the build is there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import gguf

from cllm_ollama.testing.ggufs import QWEN3_0_6B, TINY, vocab_from_gguf, write_qwen3

SHAPES = {"qwen3-0.6b": QWEN3_0_6B, "qwen3-tiny": TINY}
MODEL_NAME = "bench-qwen3"


def model_paths(cache: Path, shape: str) -> tuple[Path, Path]:
    """The F16 model and its Q4_K_M (``bench/make_model.py``'s name, so compare.py reuses it)."""
    final = cache / "models" / f"{shape}-random-qwen-vocab-q4_k_m.gguf"
    return final.with_suffix(".f16.gguf"), final


def write_f16(cache: Path, shape: str, vocab: Path) -> None:
    f16, final = model_paths(cache, shape)
    if final.exists() or f16.exists():
        return
    f16.parent.mkdir(parents=True, exist_ok=True)
    part = f16.with_suffix(".part")
    write_qwen3(part, shape=SHAPES[shape], vocab=vocab_from_gguf(vocab), weight_std=0.02,
                qtype=gguf.GGMLQuantizationType.F16, name=f"{shape}-random")  # fmt: skip
    part.rename(f16)


def quantize_model(cache: Path, shape: str, threads: int) -> Path:
    from cllm_ollama.engine.binding import quantize  # loads libllama: only once it is built

    f16, final = model_paths(cache, shape)
    if not final.exists():
        part = final.with_suffix(".part")
        quantize(f16, part, "Q4_K_M", n_threads=threads)
        part.rename(final)
        f16.unlink()
    return final


@dataclass(frozen=True)
class Levels:
    """The bench's shape: concurrency levels, requests per level (None: max(2 x level, 8)), tokens."""

    levels: tuple[int, ...]
    requests: int | None
    prompt_tokens: int
    max_tokens: int
    slots: int
    ctx: int
    threads: int
    gpu: bool


def _plan(a: argparse.Namespace, lv: Levels) -> Any:
    """compare.py's plan for the distinct workload, with ``lv.slots`` slots (not the top level)."""
    import compare  # imports the binding: only once llama.cpp is built

    argv = ["--cache", str(a.cache), "--out", str(a.out), "--report", str(a.out / "report-unused.md"),
            "--shape", a.shape, "--threads", str(lv.threads), "--concurrency", ",".join(map(str, lv.levels)),
            "--prompt-tokens", str(lv.prompt_tokens), "--max-tokens", str(lv.max_tokens), "--ctx", str(lv.ctx),
            "--workload", "distinct", "--no-batched-bench"]  # fmt: skip
    if lv.requests:
        argv += ["--requests", str(lv.requests)]
    base, _ = compare.parse_args(argv)
    slots = lv.slots

    @dataclass(frozen=True)
    class SlotsPlan(type(base)):  # type: ignore[misc]
        @property
        def slots(self) -> int:
            return slots

    return SlotsPlan(**{f.name: getattr(base, f.name) for f in fields(base)})


def bench(a: argparse.Namespace, lv: Levels) -> None:
    """cllm (``lv.slots`` slots), llama-server -np ``lv.slots`` and -np 1 in turn, each result
    written when it is done, then the table."""
    import compare
    from plan import Outcome

    plan = _plan(a, lv)
    _, model = model_paths(a.cache, a.shape)
    binary = a.build / "bin" / "llama-server"
    offload = ("-ngl", "999") if lv.gpu else ()
    work = a.cache / "store"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    outcomes = []
    for name in a.targets.split(","):
        if name == "cllm":
            outcome, setup = compare.cllm_outcome(plan, model, work)
        else:
            slots = 1 if name == "llama-server-np1" else lv.slots
            server = compare.llama_server(plan, binary, model, name, slots, lv.ctx, offload)
            args = compare.bench_args(plan, name, server.base_url, "openai-completions", f"llama-server -np {slots}")
            outcome, setup = Outcome(name, server, args), (lambda: None)
        outcomes.append(compare.run_target(plan, outcome, setup))
        write_table(a.out, lv, outcomes)
    print("\n".join(table_lines(lv, outcomes)))


def _by_level(outcome: Any) -> dict[int, dict[str, Any]]:
    return {row["concurrency"]: row for row in (outcome.result or {}).get("levels", [])}


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table_lines(lv: Levels, outcomes: list[Any]) -> list[str]:
    """Generated tok/s and TTFT p50 per target and level, and the issue's ratios (at 32:
    cllm >= 2x -np 1, >= 1.0x -np N, TTFT p50 <= -np N's)."""
    rows = {o.name: _by_level(o) for o in outcomes}
    names = [o.name for o in outcomes]
    head = ["conc", *(f"{n} tok/s" for n in names), *(f"{n} TTFT p50 ms" for n in names),
            "cllm/np1 (>=2)", f"cllm/np{lv.slots} (>=1.0)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def get(name: str, c: int, key: str) -> float | None:
        row = rows.get(name, {}).get(c)
        if row is None:
            return None
        return row["ttft_ms"]["p50"] if key == "ttft" else row["tokens_per_s"]

    def ratio(c: int, other: str) -> str:
        x, y = get("cllm", c, "tps"), get(other, c, "tps")
        return f"{x / y:.2f}" if x and y else "-"

    for c in lv.levels:
        cells = [str(c), *(_num(get(n, c, "tps")) for n in names), *(_num(get(n, c, "ttft")) for n in names)]
        cells += [ratio(c, "llama-server-np1"), ratio(c, "llama-server")]
        lines.append("| " + " | ".join(cells) + " |")
    errors = [f"{o.name}: {o.error}" for o in outcomes if o.error]
    return lines + [f"- failed: {e}" for e in errors]


def write_table(out: Path, lv: Levels, outcomes: list[Any]) -> None:
    setup = (f"levels {','.join(map(str, lv.levels))}; {lv.slots} slots (cllm, llama-server), {lv.ctx} tokens each; "
             f"prompt ~{lv.prompt_tokens}, {lv.max_tokens} generated; requests per level "
             f"{lv.requests or 'max(2 x level, 8)'}; {lv.threads} threads")  # fmt: skip
    commands = [f"- {o.name}: `{o.server.command_line}`" for o in outcomes]
    text = "\n".join(["# cllm vs llama-server on the device", "", setup, "", *table_lines(lv, outcomes), "", *commands])
    (out / "bench.md").write_text(text + "\n")


def batched(a: argparse.Namespace, lv: Levels) -> None:
    """llama-batched-bench at the bench's levels: decode with no HTTP, no scheduler (the ceiling)."""
    _, model = model_paths(a.cache, a.shape)
    argv = [str(a.build / "bin" / "llama-batched-bench"), "-m", str(model), "-c", str(max(lv.levels) * lv.ctx),
            "-t", str(lv.threads), "-npp", str(lv.prompt_tokens), "-ntg", str(lv.max_tokens),
            "-npl", ",".join(map(str, lv.levels)), "--output-format", "jsonl",
            *(("-ngl", "999") if lv.gpu else ())]  # fmt: skip
    print(f"== llama-batched-bench: {' '.join(argv)}", flush=True)
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    (a.out / "batched-bench.json").write_text(json.dumps({"command": " ".join(argv), "rows": rows}, indent=1))
    for r in rows:
        print(f"  B={r['pl']}: S_TG {r['speed_tg']:.1f} tok/s, S_PP {r['speed_pp']:.1f} tok/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=("f16", "model", "bench", "offload", "batched"))
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--build", type=Path, help="the llama.cpp build folder (bin/llama-server...)")
    p.add_argument("--vocab", type=Path, help="f16: llama.cpp's models/ggml-vocab-qwen2.gguf")
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    p.add_argument("--targets", default="cllm,llama-server,llama-server-np1")
    p.add_argument("--levels", default="1,8,32,64")
    p.add_argument("--requests", type=int, help="per level [max(2 x level, 8)]")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--slots", type=int, default=32)
    p.add_argument("--ctx", type=int, default=512, help="tokens per slot")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--gpu", action="store_true", help="offload every layer of llama.cpp's tools (-ngl 999)")
    p.add_argument("--overhead-share", type=float, default=0.5, help="offload: the share of layers left to fit")
    a = p.parse_args()
    a.cache, a.out = a.cache.resolve(), a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    lv = Levels(tuple(int(c) for c in a.levels.split(",")), a.requests, a.prompt_tokens, a.max_tokens,
                a.slots, a.ctx, a.threads, a.gpu)  # fmt: skip
    if a.step == "f16":
        write_f16(a.cache, a.shape, a.vocab)
    elif a.step == "model":
        print(quantize_model(a.cache, a.shape, a.threads))
    elif a.step == "bench":
        bench(a, lv)
    elif a.step == "batched":
        batched(a, lv)
    else:
        import gpu_offload

        gpu_offload.run(a.cache, a.out, model_paths(a.cache, a.shape)[1], a.threads, a.overhead_share)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
