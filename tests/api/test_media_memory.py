"""Image bombs against the real ``cllm serve``: a 54-byte BMP header claims 8192x8192 (201 MB of
RGB decoded). 110 of them in a request (8 KB of JSON) once took a server past 20 GB; now the
request is refused by the headers' sizes, and requests within the limits decode one image at a
time, reduced, within the server's decode budget (a valid 8192x8192 WebP among them). The
server's peak RSS (VmHWM) is the proof.
"""

from __future__ import annotations

import base64
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from harness.child_server import cllm_serve
from PIL import Image
from serving import create_from_files

from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import bmp_claiming

pytestmark = pytest.mark.model

# The documented bound (README, "Images and audio"): a tiny model's server (~150 MB) plus two
# 201 MB decodes at once (CLLM_MAX_DECODE_PIXELS' default) and their reduction's few MB.
PEAK_BOUND = 1 << 30
BOMB = base64.b64encode(bmp_claiming(8192, 8192)).decode()


def webp_bomb() -> str:
    """A valid 8192x8192 lossless WebP of one colour: 2.6 KB (it once cost 1.4 GB to decode)."""
    out = io.BytesIO()
    Image.new("RGB", (8192, 8192), (10, 200, 30)).save(out, format="WEBP", lossless=True)
    return base64.b64encode(out.getvalue()).decode()


def peak_rss(pid: int) -> int:
    """The process's peak resident set (``VmHWM``), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def generate(url: str, images: list[str]) -> httpx.Response:
    body = {
        "model": "eyes",
        "prompt": "What is this?",
        "images": images,
        "stream": False,
        "options": {"num_predict": 1, "temperature": 0},
    }
    return httpx.post(f"{url}/api/generate", json=body, timeout=300)


def test_image_bombs_are_refused_or_decoded_within_the_memory_bound(tmp_path: Path) -> None:
    settings = {"OLLAMA_CONTEXT_LENGTH": "512", "OLLAMA_NUM_PARALLEL": "4", "CLLM_NUM_THREAD": "2"}
    with cllm_serve(tmp_path / "models", settings, tmp_path / "serve.log") as (proc, url):
        create_from_files(url, "eyes", write_vision(tmp_path / "gemma3", kind="gemma3"))
        assert generate(url, [BOMB]).status_code == 200  # loaded, one bomb decoded (reduced to 32 px)
        webp = webp_bomb()
        with ThreadPoolExecutor(8) as pool:
            refused = list(pool.map(lambda _: generate(url, [BOMB] * 110), range(8)))
            within = list(pool.map(lambda _: generate(url, [BOMB, webp]), range(8)))  # the request limit exactly
        for r in refused:
            assert r.status_code == 400
            assert r.json() == {
                "error": "the request's images add up to 7381975040 pixels: more than 134217728 "
                "(CLLM_MAX_REQUEST_PIXELS); send fewer or smaller images"
            }
        assert [r.status_code for r in within] == [200] * 8, [r.text for r in within]
        # /v1 too, in OpenAI's shape: one image past the largest decoded.
        url_image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + BOMB}}
        big = base64.b64encode(bmp_claiming(8193, 8192)).decode()
        r = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "eyes",
                "max_tokens": 1,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            url_image,
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + big}},
                        ],
                    }
                ],
            },
            timeout=60,
        )
        assert r.status_code == 400
        assert r.json()["error"]["message"].startswith("image 1 is 8193x8192: larger than 67108864 pixels")
        peak = peak_rss(proc.pid)
        assert proc.poll() is None
    assert peak < PEAK_BOUND, f"peak RSS {peak / 2**20:.0f} MiB"
