"""Saved prompt states on disk belong to the weights *and* the adapters that computed them: a LoRA
changes every layer's KV, so an adapted model never reads its base's states, nor the base its."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from cllm_ollama.engine.binding import STATE_FORMAT
from cllm_ollama.engine.disk_cache import identity_digest
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.kv_store import disk_cache_for

WEIGHTS = Path("/store/blobs/sha256-" + "a" * 64)
ADAPTER = Path("/store/blobs/sha256-" + "b" * 64)


def _identity(tmp_path: Path, adapters: tuple[Path, ...], n_swa: int = 0) -> bytes:
    spec = LoadSpec(WEIGHTS, n_slots=2, n_ctx_slot=256, cache_dir=tmp_path, cache_disk_bytes=1 << 20, adapters=adapters)
    disk = disk_cache_for(SimpleNamespace(path=WEIGHTS, n_swa=n_swa), spec)  # type: ignore[arg-type]
    assert disk is not None
    try:
        return disk.identity
    finally:
        disk.close()


def test_the_disk_tier_identity_includes_the_adapters_and_is_unchanged_without(tmp_path: Path) -> None:
    base, adapted = _identity(tmp_path, ()), _identity(tmp_path, (ADAPTER,))
    assert base != adapted
    # A model without adapters has no adapter part in its identity. Its states are kept as one KV
    # stream (``state_streams``), whatever the slot count; a sliding-window model's, which cannot
    # be, keep the identity they had before adapters existed (the slot count in it).
    assert base == identity_digest(WEIGHTS.name, "f16", None, "any slot count", STATE_FORMAT, "")
    assert _identity(tmp_path, (), n_swa=512) == identity_digest(WEIGHTS.name, "f16", None, 2, STATE_FORMAT, "")


def test_the_deterministic_mode_keeps_its_states_apart(tmp_path: Path) -> None:
    # A state computed by the default kernels, restored in the mode, would answer as neither does
    # cold (bench/determinism.py found every prompt differ when the two shared a folder).
    spec = LoadSpec(WEIGHTS, n_slots=2, n_ctx_slot=256, cache_dir=tmp_path, cache_disk_bytes=1 << 20)
    identities = []
    for mode in (False, True):
        disk = disk_cache_for(SimpleNamespace(path=WEIGHTS, n_swa=0), replace(spec, deterministic=mode))  # type: ignore[arg-type]
        assert disk is not None
        identities.append(disk.identity)
        disk.close()
    assert identities[0] != identities[1]
    assert identities[0] == _identity(tmp_path, ())  # the default's files are where they were
