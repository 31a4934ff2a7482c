"""Load a model as ``cllm serve`` does, outside the server, saying each stage as it goes.

On the H200 (2026-11-28) ``cllm serve`` died without a word while loading a model fully
offloaded, while the same build ran ``bench/save_stall.py`` through the binding. This runs the
serve path's load (``LoadedModel``: device fitting and tuning, the probe child, the weights, the
memory check, the engine thread's context) and one short generation, with a line before and after
each stage, flushed: the last line printed says where a death happened (``PYTHONFAULTHANDLER=1``
adds the Python stack; ``bench/gpu_check.sh`` leaves it off on a GPU, where every load that had it
died), and a clean run says the cause lies in the server around the engine (uvicorn, threads), not in it.

    python bench/gpu_load_steps.py MODEL.gguf [--slots 32] [--ctx 512]

Settings come from the environment as for ``cllm serve`` (``CLLM_*``/``OLLAMA_*``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cllm_ollama.config import Settings
from cllm_ollama.engine import loaded, tuning
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.weights import SharedWeights

START = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - START:7.2f}s] {text}", flush=True)


def staged(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` saying when it starts and ends."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        say(f"{name} ...")
        result = fn(*args, **kwargs)
        say(f"{name} done")
        return result

    return wrapper


def instrument() -> None:
    """Wrap the stages ``LoadedModel.__init__`` goes through, where it looks them up."""
    loaded.choose = staged("tuning.choose (devices, fitting)", tuning.choose)
    loaded.probe = staged("probe (a child loads the model)", loaded.probe)
    loaded.check_load_memory = staged("check_load_memory", loaded.check_load_memory)
    loaded.Runner = staged("Runner (context, KV store, engine thread)", loaded.Runner)  # type: ignore[misc]
    SharedWeights.acquire = staged("SharedWeights.acquire (the weights)", SharedWeights.acquire)  # type: ignore[method-assign]


async def generate(model: loaded.LoadedModel, n: int) -> None:
    prompt = tuple(model.tokenize("The quick brown fox"))
    request = Request(prompt=prompt, sampling=SamplingParams(temperature=0.0), num_predict=n)
    tokens = 0
    async for event in model.generate(request):
        tokens += len(event.tokens)
        if event.error:
            say(f"generation error: {event.error}")
    say(f"generated {tokens} tokens")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path)
    p.add_argument("--slots", type=int, help="CLLM_NUM_PARALLEL's place (default: the settings')")
    p.add_argument("--ctx", type=int, help="tokens per slot (default: the settings')")
    a = p.parse_args()
    instrument()
    settings = Settings.from_env()
    spec = replace(LoadSpec.from_settings(settings), path=a.model.resolve())
    if a.slots:
        spec = tuning.pinned(spec, n_slots=a.slots)
    if a.ctx:
        spec = replace(spec, n_ctx_slot=a.ctx)
    say(f"loading {a.model.name}: {spec}")
    model = loaded.LoadedModel(spec, max_queue=8)
    say(f"loaded: {model.resolved.n_slots} slots x {model.n_ctx_slot}, placement {model.placement}")
    asyncio.run(generate(model, 8))
    model.close()
    say("closed")


if __name__ == "__main__":
    sys.exit(main())
