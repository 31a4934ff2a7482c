"""The disk prompt cache's settings: where (beside the model store unless told) and how much."""

from __future__ import annotations

from pathlib import Path

from cllm_ollama.config import Settings
from cllm_ollama.engine.frontdoor import LoadSpec


def test_the_disk_cache_lives_beside_the_model_store_by_default(tmp_path: Path) -> None:
    settings = Settings.from_env({"OLLAMA_MODELS": str(tmp_path / "models")})
    assert settings.cache_dir == tmp_path / "prompt-cache"
    assert settings.cache_disk_mib == 8192
    spec = LoadSpec.from_settings(settings)
    assert (spec.cache_dir, spec.cache_disk_bytes) == (tmp_path / "prompt-cache", 8192 << 20)


def test_cache_dir_and_size_are_set_and_zero_turns_the_disk_tier_off(tmp_path: Path) -> None:
    settings = Settings.from_env({"CLLM_CACHE_DIR": str(tmp_path / "kv"), "CLLM_CACHE_DISK": "0"})
    assert (settings.cache_dir, settings.cache_disk_mib) == (tmp_path / "kv", 0)
    assert LoadSpec.from_settings(settings).cache_disk_bytes == 0
    # As every setting, its OLLAMA_ twin is read too, and CLLM_ wins.
    both = Settings.from_env({"OLLAMA_CACHE_DISK": "10", "CLLM_CACHE_DISK": "20"})
    assert both.cache_disk_mib == 20
