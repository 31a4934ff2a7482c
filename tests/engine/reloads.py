"""Loads, a decode and unloads of one model, again and again, in a process of its own, for
``test_load_memory.py`` (``python reloads.py MODEL CYCLES``).

Prints one JSON object: the resident set after each unload, in bytes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from cllm_ollama.engine.loaded import LoadedModel, LoadSpec
from cllm_ollama.engine.memory import resident_bytes
from cllm_ollama.engine.request import Request


def cycle(path: Path) -> None:
    loaded = LoadedModel(LoadSpec(path=path, n_slots=4, n_ctx_slot=2048, n_threads=2, flash_attention=False), 4)
    try:

        async def decode() -> None:
            prompt = tuple(loaded.tokenize("one two three four " * 600))[:1800]
            async for _ in loaded.generate(Request(prompt=prompt, num_predict=4)):
                pass

        asyncio.run(decode())
    finally:
        loaded.close()


def main(path: Path, cycles: int) -> dict[str, list[int]]:
    after = []
    for _ in range(cycles):
        cycle(path)
        after.append(resident_bytes())
    return {"after_unload": after}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]))))
