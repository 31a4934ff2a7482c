"""Loads, a decode and unloads of one model, again and again, in a process of its own, for
``test_load_memory.py`` (``python reloads.py MODEL CYCLES``).

Prints one JSON object: the resident set after each unload, in bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fresh_load import decoded

from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.memory import resident_bytes


def main(path: Path, cycles: int) -> dict[str, list[int]]:
    after = []
    for _ in range(cycles):
        with decoded(LoadSpec(path=path, n_slots=4, n_ctx_slot=2048, n_threads=2, flash_attention=False), 1800):
            pass
        after.append(resident_bytes())
    return {"after_unload": after}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]))))
