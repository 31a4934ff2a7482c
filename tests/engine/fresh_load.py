"""A load and a decode in a process of its own, for ``test_load_memory.py``
(``python fresh_load.py MODEL FLASH``, FLASH one of ``on``, ``off``, ``auto``).

The resident set after a load carries whatever earlier loads' allocators kept in the same process
(a test run after ``test_tuning.py`` measured 11 MiB past the estimate), so the estimate is checked
where ``cllm serve`` makes it: in a process whose first load this is.

Prints one JSON object: the resident set after the decode, the load's host estimate, its fixed
part (the weights' host copy and the compute buffers) and the KV cache's bytes, in bytes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cllm_ollama.engine.loaded import LoadedModel, LoadSpec, host_fixed_bytes, resolved_spec
from cllm_ollama.engine.memory import resident_bytes
from cllm_ollama.engine.request import Request

FLASH = {"on": True, "off": False, "auto": None}


@contextmanager
def decoded(spec: LoadSpec, prompt_tokens: int) -> Iterator[LoadedModel]:
    """``spec`` loaded, a prompt of ``prompt_tokens`` decoded (micro-batches of 512 rows) and four
    tokens generated; closed on the way out."""
    loaded = LoadedModel(spec, 4)
    try:

        async def decode() -> None:
            prompt = tuple(loaded.tokenize("one two three four " * 1800))[:prompt_tokens]
            async for _ in loaded.generate(Request(prompt=prompt, num_predict=4)):
                pass

        asyncio.run(decode())
        yield loaded
    finally:
        loaded.close()


def main(path: Path, flash_attention: bool | None) -> dict[str, int]:
    spec = LoadSpec(path=path, n_slots=4, n_ctx_slot=8192, n_batch=512, n_threads=2, flash_attention=flash_attention)
    with decoded(spec, 7000) as loaded:  # most of a slot's cells
        return {
            "measured": resident_bytes(),
            "estimate": loaded.host_estimate,
            "fixed": host_fixed_bytes(resolved_spec(loaded.spec, loaded.model), loaded.model, offloaded=False),
            "kv": loaded.model.kv_bytes_per_token("f16") * 8192 * 4,
        }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), FLASH[sys.argv[2]])))
