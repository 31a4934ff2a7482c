"""A GGUF whose hyperparameters abort llama.cpp is refused, and never loaded in the server's process."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine import probe as probe_module
from cllm_ollama.engine.load_stall import StallWatch
from cllm_ollama.errors import EngineError
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.gguf_check import hyperparameter_problems
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3, write_vision

BROKEN: dict[str, dict[str, int | float]] = {
    "no-layers": {"qwen3.block_count": 0},
    "too-many-layers": {"qwen3.block_count": 1000},
    "experts": {"qwen3.expert_count": 2, "qwen3.expert_used_count": 4},
    "nan-eps": {"qwen3.attention.layer_norm_rms_epsilon": float("nan")},
    "negative-eps": {"qwen3.attention.layer_norm_rms_epsilon": -1.0},
}
# Per-layer head counts (a hybrid's, whose recurrent layers have none) are checked layer by layer.
PER_LAYER = {
    "uneven": ([4, 4], [0, 3], "head_count_kv 3 does not divide head_count 4"),
    "hybrid": ([4, 4], [0, 2], None),
    "scalar-heads": ([4], [2, 3], "head_count_kv 3 does not divide head_count 4"),
}
# What each breaks, as the static check names it.
REASONS = {
    "no-layers": "block_count 0 is not between 1 and 512",
    "too-many-layers": "block_count 1000 is not between 1 and 512",
    "experts": "expert_used_count 4 is more than expert_count 2",
    "nan-eps": "layer_norm_rms_epsilon is nan",
    "negative-eps": "layer_norm_rms_epsilon is negative",
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("broken")
    return {name: write_qwen3(folder / f"{name}.gguf", metadata=md) for name, md in BROKEN.items()}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_metadata_check_names_what_llama_cpp_would_assert_on(broken: dict[str, Path], name: str) -> None:
    assert any(REASONS[name] in p for p in gguf_info(broken[name]).problems)


@pytest.mark.parametrize("name", sorted(PER_LAYER))
def test_per_layer_head_counts_are_checked_layer_by_layer(name: str) -> None:
    heads, heads_kv, why = PER_LAYER[name]
    kv = {"lfm2.block_count": 2, "lfm2.attention.head_count": heads, "lfm2.attention.head_count_kv": heads_kv}
    problems = hyperparameter_problems(kv, "lfm2")
    assert problems == ([] if why is None else [f"lfm2.attention.{why}"])


def test_a_convolution_llama_cpp_asserts_on_is_a_problem() -> None:
    assert hyperparameter_problems({"lfm2.shortconv.l_cache": 1}, "lfm2") == ["lfm2.shortconv.l_cache 1 is less than 2"]
    assert hyperparameter_problems({"lfm2.shortconv.l_cache": 3}, "lfm2") == []


def test_a_sound_model_has_no_problems(tiny_gguf: Path) -> None:
    assert gguf_info(tiny_gguf).problems == ()


@pytest.mark.model
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_probe_survives_what_kills_llama_cpp(
    broken: dict[str, Path], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Without the metadata check, each of these aborts llama.cpp: the probe's child dies instead,
    and the server's log keeps the Python call it died in (faulthandler's stack)."""
    with pytest.raises(EngineError) as info:
        probe_module.probe(broken[name], n_gpu_layers=0, embedding_only=False)
    message = info.value.message
    assert "the loader was killed by SIGABRT" in message and "GGML_ASSERT" in message
    assert str(broken[name].parent) not in message  # no server paths
    assert "Fatal Python error" not in message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"the probe's child for {name}.gguf was killed by signal 6" in logged
    assert "Fatal Python error: Aborted" in logged and "in _main" in logged


def test_a_child_killed_by_a_signal_logs_its_stack_and_answers_with_what_llama_cpp_said(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = tmp_path / "segfaults.gguf"  # a path no other test has probed (a pass is remembered)
    model.write_bytes(tiny_gguf.read_bytes())
    stderr = (
        f"llama_context: error: something about {model}\nFatal Python error: Segmentation fault\n\n"
        'Current thread 0x00007f (most recent call first):\n  File "probe.py", line 226 in _main\n'
    )

    def killed(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        assert cmd[1:3] == ["-X", "faulthandler"]
        return subprocess.CompletedProcess(cmd, -11, "", stderr)

    monkeypatch.setattr(probe_module, "run_child", killed)
    with pytest.raises(EngineError) as info:
        probe_module.probe(model, n_gpu_layers=0, embedding_only=False)
    assert info.value.message == (
        "llama.cpp cannot load this model: the loader was killed by SIGSEGV: "
        "llama_context: error: something about segfaults.gguf"
    )
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "killed by signal 11" in logged and "line 226 in _main" in logged and str(tmp_path) not in logged


@pytest.mark.parametrize("on_gpu", [False, True])
def test_the_child_runs_faulthandler_only_where_the_load_stays_on_the_cpu(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_gpu: bool
) -> None:
    """On the H200 every load run with faulthandler died inside llama.cpp's load, none without it:
    a child that offloads goes without it (unless the server's own PYTHONFAULTHANDLER says so)."""
    model = tmp_path / f"on-gpu-{on_gpu}.gguf"  # a path no other test has probed (a pass is remembered)
    model.write_bytes(tiny_gguf.read_bytes())
    cmds: list[list[str]] = []

    def passes(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        cmds.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(probe_module, "run_child", passes)
    probe_module.probe(model, n_gpu_layers=29 if on_gpu else 0, embedding_only=False, on_gpu=on_gpu)
    [cmd] = cmds
    assert ("faulthandler" in cmd) is not on_gpu
    assert cmd[cmd.index("-m") + 1 :][:3] == [probe_module.__name__, str(model), "29" if on_gpu else "0"]


def test_an_illegal_instruction_says_to_rebuild_llama_cpp_here(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGILL is a build for another CPU (a copied venv, a shared wheel cache): say how to mend it."""
    model = tmp_path / "never-probed.gguf"  # a path no other test has probed (a pass is remembered)
    model.write_bytes(tiny_gguf.read_bytes())

    def killed(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, -4, "", "")

    monkeypatch.setattr(probe_module, "run_child", killed)
    with pytest.raises(EngineError) as info:
        probe_module.probe(model, n_gpu_layers=0, embedding_only=False)
    message = info.value.message
    assert message.startswith("llama.cpp cannot load this model: the loader was killed by SIGILL")
    assert "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python==" in message


@pytest.mark.model
def test_a_model_that_passed_is_not_probed_again(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe_module.probe(tiny_gguf, n_gpu_layers=0, embedding_only=False)

    def no_child(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("probed twice")

    monkeypatch.setattr(subprocess, "run", no_child)
    probe_module.probe(tiny_gguf, n_gpu_layers=0, embedding_only=False)


@pytest.mark.model
def test_uploads_of_broken_models_are_refused_and_the_server_lives(
    broken: dict[str, Path], tiny_gguf: Path, tmp_path: Path
) -> None:
    store = ModelStore(tmp_path / "models")
    settings = Settings(models_dir=tmp_path / "models", num_parallel=2, context_length=128, num_thread=1)
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        for name, path in broken.items():
            with path.open("rb") as f:
                digest = store.write_blob_from(f)
            r = client.post("/api/create", json={"model": name, "files": {"m.gguf": digest}, "stream": False})
            assert r.status_code == 400 and REASONS[name] in r.json()["error"], r.text
            # A broken file that reached the store another way (a pull, an Ollama store) is
            # refused when it is used.
            store.write_manifest(name, {"model_format": "gguf"}, [mt.Layer(mt.MODEL, digest, path.stat().st_size)])
            r = client.post("/api/generate", json={"model": name, "prompt": "hi", "stream": False})
            assert r.status_code == 500 and REASONS[name] in r.json()["error"], r.text
        with tiny_gguf.open("rb") as f:
            digest = store.write_blob_from(f)
        r = client.post("/api/create", json={"model": "good", "files": {"m.gguf": digest}, "stream": False})
        assert r.status_code == 200
        r = client.post(
            "/api/generate",
            # Greedy: a sample might end at its first token (the model can end a generation).
            json={"model": "good", "prompt": "hi", "stream": False, "options": {"num_predict": 2, "temperature": 0}},
        )
        assert r.status_code == 200 and r.json()["eval_count"] == 2


@pytest.mark.model
def test_a_projector_that_libmtmd_cannot_load_is_refused_by_the_probe(tmp_path: Path) -> None:
    text, mmproj = write_vision(tmp_path / "vision")
    probe_module.probe(text, n_gpu_layers=0, embedding_only=False, projector=mmproj)
    bad = tmp_path / "bad-mmproj.gguf"
    bad.write_bytes(mmproj.read_bytes()[: mmproj.stat().st_size // 2])  # cut short
    with pytest.raises(EngineError, match="cannot load this model"):
        probe_module.probe(text, n_gpu_layers=0, embedding_only=False, projector=bad)
