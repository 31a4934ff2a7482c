"""``cllm serve`` on llama.cpp's Vulkan backend (lavapipe on a machine without a GPU): a model
partly offloaded, by ``num_gpu`` and by the fitting (``OLLAMA_GPU_OVERHEAD`` leaving room for some
layers only), serving concurrent requests, prompt states saved from device buffers and restored,
and ``/api/ps`` / ``cllm ps`` reporting the split.

Greedy words on Vulkan may differ from the CPU's, so nothing here compares with a CPU answer: the
replies are checked for their shape, and a prompt restored from the host cache is compared with the
same prompt computed cold on the same backend, in the deterministic mode."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from cllm_ollama.cli.main import cli
from harness.child_server import cllm_serve
from polling import until
from serving import create_from_files

from cllm_ollama.engine.offload import Device, fit, kv_bytes_per_token, model_sizes
from cllm_ollama.testing.gguf_base import Shape
from cllm_ollama.testing.ggufs import write_qwen3

NAME = "vk"
N_LAYER = 8
SLOTS, CTX = 2, 1024
FITTED = 3  # the layers OLLAMA_GPU_OVERHEAD leaves room for
OPTIONS = {"temperature": 0, "seed": 1, "num_predict": 12}
# Prompts that share no start; the first made long (the host cache keeps states of 256 tokens or more).
TOPICS = ["rivers and their deltas", "the history of printing", "how compilers optimise loops", "tides"]


def long_prompt(topic: str) -> str:
    """~300 tokens of the test model's vocabulary (lavapipe reads ~10-20 prompt tokens a second)."""
    words = topic.split()
    return f"{topic.upper()}: " + " ".join(f"{topic} {i} {words[i % len(words)]}" for i in range(14))


def device_free(env: dict[str, str]) -> int:
    """The first device's free bytes as a process holding llama.cpp's Vulkan instance sees it."""
    probe = "from cllm_ollama.engine.binding import gpu_devices; print(gpu_devices()[0][1])"
    seen = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    return int(seen.stdout.strip().splitlines()[-1])


def overhead_for(model: Path, free: int, layers: int) -> int:
    """OLLAMA_GPU_OVERHEAD under which cllm's fitting (engine/offload.py) places ``layers`` layers:
    half a layer more than they need is left, so the count does not hang on a byte."""
    sizes = model_sizes(model, SLOTS * CTX, kv_bytes_per_token(model), 512)
    per_layer = sizes.layers[0] + sizes.kv_per_layer
    overhead = free - per_layer // 2
    while fit([Device("vk", free)], sizes, overhead=overhead).n_gpu_layers < layers:
        overhead -= per_layer // 4
    assert fit([Device("vk", free)], sizes, overhead=overhead).n_gpu_layers == layers
    return overhead


@contextlib.contextmanager
def serve_on(env: dict[str, str], root: Path, *, fitted: bool = False) -> Iterator[tuple[str, Path]]:
    """A ``cllm serve`` on the Vulkan build ``env`` names, in the deterministic mode, with the
    8-layer model created as NAME; ``fitted``: with an overhead that leaves the device room for
    FITTED of its layers. Its URL and log."""
    model = write_qwen3(root / "vk.gguf", shape=Shape(n_layer=N_LAYER), endless=True)
    settings = {
        **env,
        "OLLAMA_NUM_PARALLEL": str(SLOTS),
        "OLLAMA_CONTEXT_LENGTH": str(CTX),
        "CLLM_NUM_THREAD": "2",
        "CLLM_DETERMINISTIC": "1",
        "CLLM_CACHE_DISK": "0",  # restores come from the host-RAM cache, not the disk tier
        "PYTHONFAULTHANDLER": "1",  # a crash in llama.cpp leaves a traceback in the log
    }
    if fitted:
        settings["OLLAMA_GPU_OVERHEAD"] = str(overhead_for(model, device_free(env), FITTED))
    log = root / "serve.log"
    with cllm_serve(root / "models", settings, log, ready_s=120) as (_, url):
        create_from_files(url, NAME, (model,))
        yield url, log


@pytest.fixture(scope="module")
def served(vulkan_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A ``cllm serve`` on the Vulkan build (Mesa 25's lavapipe without a GPU); its URL and log."""
    with serve_on(vulkan_env, tmp_path_factory.mktemp("vulkan")) as served:
        yield served


@pytest.fixture(scope="module")
def fitted(system_vulkan_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A ``cllm serve`` on the system's own Vulkan driver, with an overhead that leaves the device
    room for FITTED of the model's layers; its URL and log."""
    with serve_on(system_vulkan_env, tmp_path_factory.mktemp("fitted"), fitted=True) as served:
        yield served


def generate(url: str, prompt: str, *, logprobs: bool = False, **options: Any) -> dict[str, Any]:
    body = {"model": NAME, "prompt": prompt, "stream": False, "logprobs": logprobs, "options": {**OPTIONS, **options}}
    reply = httpx.post(url + "/api/generate", json=body, timeout=600)
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def loaded(url: str) -> dict[str, Any]:
    (model,) = httpx.get(url + "/api/ps").json()["models"]
    return model  # type: ignore[no-any-return]


def unload(url: str) -> None:
    httpx.post(url + "/api/generate", json={"model": NAME, "keep_alive": 0}, timeout=120).raise_for_status()
    until(lambda: not httpx.get(url + "/api/ps").json()["models"], timeout=120)


def processor_column(url: str) -> str:
    """``cllm ps``'s PROCESSOR cell for the model (the command run against the live server)."""
    result = CliRunner().invoke(cli, ["ps"], env={"OLLAMA_HOST": url.removeprefix("http://")})
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()[:2]
    start = header.index("PROCESSOR")
    return row[start : header.index("CONTEXT")].strip()


def split_of(size: int, layers: int) -> tuple[int, str]:
    """size_vram for ``layers`` offloaded layers (the output layer counts as one more of
    N_LAYER + 1), and Ollama's PROCESSOR cell for it."""
    vram = size * layers // (N_LAYER + 1)
    cpu = round((size - vram) / size * 100)
    return vram, f"{cpu}%/{100 - cpu}% CPU/GPU"


def test_the_fitted_load_puts_only_the_layers_that_fit_on_the_device(fitted: tuple[str, Path]) -> None:
    url, log = fitted
    reply = generate(url, "Hello there")
    assert reply["eval_count"] == OPTIONS["num_predict"] and reply["response"]
    ps = loaded(url)
    vram, column = split_of(ps["size"], FITTED)
    assert 0 < ps["size_vram"] == vram < ps["size"]
    assert processor_column(url) == column
    text = log.read_text(errors="replace")
    assert re.search(rf"{FITTED} layers to the GPUs \(Vulkan0: {FITTED}\), \d+%/\d+% CPU/GPU", text), text[-3000:]
    assert re.search(r"GPU Vulkan0: [\d.]+ GiB free of [\d.]+ GiB", text), text[-3000:]


@pytest.mark.parametrize("num_gpu", [5, 0, N_LAYER + 1])
def test_num_gpu_puts_exactly_that_many_layers_on_the_device(served: tuple[str, Path], num_gpu: int) -> None:
    url, _ = served
    reply = generate(url, "Tell me about offloading", num_gpu=num_gpu)
    assert reply["eval_count"] == OPTIONS["num_predict"] and reply["response"]
    ps = loaded(url)
    if num_gpu == 0:
        assert (ps["size_vram"], processor_column(url)) == (0, "100% CPU")
    elif num_gpu == N_LAYER + 1:
        assert (ps["size_vram"], processor_column(url)) == (ps["size"], "100% GPU")
    else:
        assert (ps["size_vram"], processor_column(url)) == split_of(ps["size"], num_gpu)


def test_concurrent_requests_on_a_partly_offloaded_model(served: tuple[str, Path]) -> None:
    url, _ = served
    generate(url, "warm up", num_gpu=4)  # loads 4 of the layers on the device

    async def burst() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=600) as client:

            async def one(i: int) -> dict[str, Any]:
                body = {"model": NAME, "prompt": f"Request {i}: count to ten", "stream": False}
                body["options"] = {**OPTIONS, "num_gpu": 4, "num_predict": 4 + i}
                r = await client.post(url + "/api/generate", json=body)
                assert r.status_code == 200, r.text
                return r.json()  # type: ignore[no-any-return]

            return list(await asyncio.gather(*(one(i) for i in range(3 * SLOTS))))

    replies = asyncio.run(burst())
    assert [r["eval_count"] for r in replies] == [4 + i for i in range(3 * SLOTS)]
    assert all(r["response"] and r["done_reason"] == "length" for r in replies)
    assert loaded(url)["size_vram"] == split_of(loaded(url)["size"], 4)[0]


def test_a_prompt_state_saved_from_the_device_is_restored_and_answers_as_cold(served: tuple[str, Path]) -> None:
    url, log = served
    generate(url, "reload with 4 layers on the device", num_gpu=4)
    unload(url)  # a fresh engine: its stats at the next unload are this test's alone
    first, others = long_prompt(TOPICS[0]), [f"{topic}?" for topic in TOPICS[1:]]
    cold = generate(url, first, num_gpu=4, logprobs=True)
    assert cold["prompt_eval_count"] >= 256, "the prompt must be long enough for the host cache"
    for prompt in others:  # take both slots, so that the first prompt's state goes to the host cache
        generate(url, prompt, num_gpu=4)
    again = generate(url, first, num_gpu=4, logprobs=True)
    assert [(t["token"], t["logprob"]) for t in again["logprobs"]] == [
        (t["token"], t["logprob"]) for t in cold["logprobs"]
    ]
    unload(url)
    pattern = r"prompt tokens \d+, not computed \d+ \(own slot \d+, copied \d+, restored (\d+), loaded \d+\)"
    stats = until(lambda: re.findall(pattern, log.read_text(errors="replace")), timeout=60)
    assert int(stats[-1]) >= 256, log.read_text(errors="replace")[-3000:]


def test_a_prompt_read_again_on_a_split_model_answers_as_cold(served: tuple[str, Path]) -> None:
    """The deterministic mode on a model split between the device and the CPU, for a prompt under
    the host cache's 256 tokens: read cold by a fresh engine, then again after other prompts took
    both slots, in other chunks (the step budget follows the measured step times). llama.cpp's op
    offload would run the CPU layers' products on the device for chunks of 32 rows or more only,
    and the two reads would round differently (seen for 3 prompts of 3 like this one)."""
    url, _ = served
    generate(url, "reload with 4 layers on the device", num_gpu=4)
    unload(url)
    first = long_prompt("tides 1")
    cold = generate(url, first, num_gpu=4, logprobs=True)
    assert cold["prompt_eval_count"] < 256, "a prompt the host cache does not keep: read again whole"
    for topic in TOPICS[:3]:
        generate(url, f"{topic}?", num_gpu=4)
    again = generate(url, first, num_gpu=4, logprobs=True)
    assert [(t["token"], t["logprob"]) for t in again["logprobs"]] == [
        (t["token"], t["logprob"]) for t in cold["logprobs"]
    ]


PROJECTOR_ON_DEVICE = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from cllm_ollama.engine.binding import Model, Projector
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import png
text, mmproj = write_vision(Path(sys.argv[1]))
model = Model(text, n_gpu_layers=99)
projector = Projector(model, mmproj, n_threads=1, device=0)
prompt = projector.tokenize(projector.marker + " what is this?", [png(32, 32)])
(item,) = [part for part in prompt.parts if not isinstance(part, tuple)]
print("image embeddings", prompt.encode(item).shape)
prompt.close(); projector.close(); model.close()
"""


def test_the_projector_runs_on_the_device_it_is_given(vulkan_env: dict[str, str], tmp_path: Path) -> None:
    """clip.cpp told which device to use (``offload.projector_device``, where the fit budgeted it)
    through ``mtmd_context_params.device``: a handle from llama.cpp's device list."""
    seen = subprocess.run(
        [sys.executable, "-c", PROJECTOR_ON_DEVICE, str(tmp_path)],
        env={**os.environ, **vulkan_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert seen.returncode == 0, seen.stderr[-3000:]
    assert "CLIP using Vulkan0 backend" in seen.stdout and "image embeddings" in seen.stdout, seen.stdout[-3000:]
