"""transformers and PEFT as the oracle of converted checkpoints (compat/hf_oracle.sh's venv): run
the script ``hf_logits.py`` under it, and the checks several test files share."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import httpx
import numpy as np
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.modelfile import model_folder_files

VENV = Path(os.environ.get("HF_ORACLE_VENV") or Path.home() / ".cache" / "cllm-hf-oracle" / "venv")
SCRIPT = Path(__file__).with_name("hf_logits.py")
# F16 weights and activations against transformers' F32 arithmetic on them: up to ~1.1% of the
# largest value was seen (Phi-3 with a rank-stabilized adapter); a misplaced row, scale or norm
# is tens of percent (Gemma 3 scaled by the wrong query_pre_attn_scalar: 60%).
TOLERANCE = 0.04


def run(*args: str) -> None:
    """``hf_logits.py ARGS`` under the venv that has transformers and PEFT (skips without it)."""
    if not (VENV / "cllm-ready").is_file():
        pytest.skip(f"transformers and PEFT are not installed in {VENV}: run `bash compat/hf_oracle.sh`")
    done = subprocess.run(
        [str(VENV / "bin" / "python"), str(SCRIPT), *args], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]


def assert_close(got: np.ndarray, want: np.ndarray, what: str, tolerance: float = TOLERANCE) -> None:
    """At most ``tolerance`` of the largest value apart, anywhere."""
    worst = float(np.abs(got - want).max())
    assert worst <= tolerance * float(np.abs(want).max()), f"{what}: max |difference| {worst:.3f}"


def assert_embeds_as_transformers(folder: Path, tmp_path: Path, texts: list[str]) -> None:
    """``folder`` (a sentence-transformers model) created on a live server as ``ollama create``
    sends it: each text is split as its tokenizer splits it (special tokens aside) and embedded
    as transformers embeds it with the folder's mean pooling and Dense modules."""
    run("embed", str(folder), json.dumps(texts), str(tmp_path / "want.json"))
    want = json.loads((tmp_path / "want.json").read_text())
    app = create_app(Settings(models_dir=tmp_path / "models"))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=300) as http:
        files = {}
        for name, path in model_folder_files(folder, str(folder)).items():
            digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            assert http.post(f"/api/blobs/{digest}", content=path.read_bytes()).status_code == 201
            files[name] = digest
        assert http.post("/api/create", json={"model": "embedder", "files": files, "stream": False}).status_code == 200
        got = http.post("/api/embed", json={"model": "embedder", "input": texts}).json()["embeddings"]
        for text, expected, vector in zip(texts, want, got, strict=True):
            tokens = http.post("/api/tokenize", json={"model": "embedder", "content": text}).json()["tokens"]
            assert tokens == expected["words"], text
            assert_close(np.array(vector), np.array(expected["embedding"]), text)
