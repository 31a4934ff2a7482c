"""One ``llama_model`` per GGUF in memory, shared by every loaded model over it.

A model with a LoRA adapter runs in its own context (llama.cpp applies a context's adapters to
every token it decodes), but its weights are its base's: the base and each adapted variant hold
the same ``Model`` here, and the last of them to unload frees it.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

from ..errors import EngineError
from .binding import Model
from .load_stall import StallWatch


class SharedWeights:
    """Reference-counted ``Model``s by (file, GPU layers, batch invariance, split, memory map): the
    one owner of the weights it hands out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[Path, int, bool, tuple[float, ...], bool], tuple[Model, int]] = {}

    def acquire(
        self,
        path: Path,
        n_gpu_layers: int,
        batch_invariant: bool = False,
        tensor_split: tuple[float, ...] = (),
        stall_timeout: float = math.inf,
        use_mmap: bool = True,
    ) -> Model:
        """The loaded weights of ``path`` (loaded now if nobody holds them); ``release`` gives them back.

        Blocking: a first load reads the file. Loads are serialised here, so one file is never
        loaded twice by two loads at once. A load without progress for ``stall_timeout`` ends
        with ``LoadStalled``."""
        key = (path, n_gpu_layers, batch_invariant, tensor_split, use_mmap)
        with self._lock:
            held = self._held.get(key)
            if held is None:
                watch = StallWatch(stall_timeout)
                try:
                    model = Model(
                        path,
                        n_gpu_layers=n_gpu_layers,
                        batch_invariant=batch_invariant,
                        tensor_split=tensor_split,
                        use_mmap=use_mmap,
                        progress=watch.heard,
                    )
                except EngineError:
                    if watch.stalled:
                        raise watch.error() from None
                    raise
                held = (model, 0)
            self._held[key] = (held[0], held[1] + 1)
            return held[0]

    def release(self, model: Model) -> None:
        """One holder is done with ``model``; the last one frees it."""
        with self._lock:
            for key, (held, refs) in self._held.items():
                if held is model:
                    if refs > 1:
                        self._held[key] = (held, refs - 1)
                    else:
                        del self._held[key]
                        model.close()
                    return
        raise ValueError("these weights were not handed out here")

    def layout(self, path: Path, batch_invariant: bool = False) -> tuple[int, tuple[float, ...]] | None:
        """The GPU layers and split of ``path``'s weights in memory, if any: a model over them (an
        adapted or projector variant of a loaded one) takes them as they are placed rather than
        fitting its own, which would load a second copy wherever the first left less room."""
        with self._lock:
            for held_path, n_gpu_layers, invariant, tensor_split, _ in self._held:
                if held_path == path and invariant == batch_invariant:
                    return n_gpu_layers, tensor_split
        return None

    def loaded(self) -> list[tuple[Path, int]]:
        """Each ``llama_model`` in memory: its file and how many loaded models use it."""
        with self._lock:
            return [(path, refs) for (path, *_), (_, refs) in self._held.items()]
