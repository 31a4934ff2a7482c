"""llama.cpp short of memory, for real, in a process of its own, for ``test_load_oom.py``: the
process's address space is capped (``RLIMIT_AS``) at what it holds, so llama.cpp's next buffer
(the weights' mapping, a KV cache) fails to allocate as a full GPU's would.

``python short_of_memory.py binding MODEL``: a ``Model`` and a ``Context`` made past the cap;
prints one JSON object, the error each raised (its type, and the slots it says fit).

``python short_of_memory.py probe MODEL ARGS...``: the probe's child (``engine.probe`` run as
``__main__`` with ARGS), capped when it makes its context.
"""

from __future__ import annotations

import json
import resource
import runpy
import sys
from pathlib import Path
from typing import Any

from cllm_ollama.engine.binding import Context, Model, core
from cllm_ollama.errors import EngineError


def cap() -> None:
    """No more address space than the process holds now."""
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (held, resource.RLIM_INFINITY))


def raised(make: Any) -> list[Any]:
    try:
        make()
    except EngineError as exc:
        return [type(exc).__name__, getattr(exc, "fits", None), str(exc)]
    return ["nothing", None, ""]


def binding(path: Path) -> dict[str, list[Any]]:
    model = Model(path)
    cap()
    return {
        "context": raised(lambda: Context(model, n_seq_max=4, n_ctx_seq=1024, n_batch=16, n_threads=1)),
        "model": raised(lambda: Model(path)),
    }


def probe_child(args: list[str]) -> None:
    make = core.ll.llama_init_from_model

    def capped(*call: Any) -> Any:
        cap()
        return make(*call)

    core.ll.llama_init_from_model = capped
    sys.argv = ["probe", *args]
    runpy.run_module("cllm_ollama.engine.probe", run_name="__main__")


if __name__ == "__main__":
    if sys.argv[1] == "binding":
        print(json.dumps(binding(Path(sys.argv[2]))))
    else:
        probe_child(sys.argv[2:])
