"""Running streams' inter-token latency with and without a concurrent image encode (issue 17).

    python bench/vision_itl.py [--streams 2] [--tokens 200] [--images 3]

A tiny random-weight gemma3 and a projector large enough that an encode takes a while on a CPU
(a one-block ViT over 448 px in 14 px patches: 1024 patches, pooled to 64 image tokens) load in
the real engine. ``--streams`` text requests generate ``--tokens`` tokens each, once alone and once
while image requests (distinct pictures, one after another) run beside them. Prints each
phase's inter-token latency p50/p95/max and the image requests' time to first token, which is
mostly the encode. Timings on a shared machine are noisy: compare the two phases of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.testing.ggufs import TINY, VisionShape, write_gemma3, write_gemma3_projector
from cllm_ollama.testing.images import png

VIT = VisionShape(image_size=448, patch_size=14, n_embd=256, n_head=4, n_ff=1024, merge=4)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def stream(model: LoadedModel, prompt: str, n: int) -> list[float]:
    """Gaps between a request's tokens, in ms (the first token's wait left out)."""
    request = Request(tuple(model.tokenize(prompt)), SamplingParams(temperature=0), num_predict=n)
    times = []
    async for event in model.generate(request):
        if event.tokens:
            times.append(time.perf_counter())
    return [1e3 * (b - a) for a, b in itertools.pairwise(times)]


async def see(model: LoadedModel, seed: int) -> float:
    """One image request: its time to first token in ms."""
    marker = model.media_marker
    assert marker is not None
    media = await asyncio.to_thread(model.tokenize_media, f"Look: {marker} What is it?", [png(448, 448, seed=seed)])
    request = Request(cell_keys(media.parts), SamplingParams(temperature=0), num_predict=2, media=media)
    t0 = time.perf_counter()
    first = 0.0
    async for event in model.generate(request):
        if event.tokens and not first:
            first = time.perf_counter() - t0
    return 1e3 * first


async def phase(
    model: LoadedModel, args: argparse.Namespace, images: int, seed: int
) -> tuple[list[float], list[float]]:
    streams = [stream(model, f"Tell a story number {i}.", args.tokens) for i in range(args.streams)]
    gaps_task = asyncio.gather(*streams)

    async def images_meanwhile() -> list[float]:
        await asyncio.sleep(0.05)  # let the streams start generating
        return [await see(model, seed + i) for i in range(images)]

    gaps, ttft = await asyncio.gather(gaps_task, images_meanwhile())
    return [g for one in gaps for g in one], ttft


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--images", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = write_gemma3(Path(tmp) / "text.gguf")
        proj = write_gemma3_projector(Path(tmp) / "mmproj.gguf", n_embd_text=TINY.n_embd, shape=VIT)
        spec = LoadSpec(
            path=text, n_slots=args.streams + 1, n_ctx_slot=1024, n_threads=args.threads, projector=proj, cache_bytes=0
        )
        model = LoadedModel(spec, max_queue=8)
        try:
            asyncio.run(phase(model, args, 1, 1000))  # warm up (first encode allocates)
            for name, images in (("alone", 0), ("with image encodes", args.images)):
                gaps, ttft = asyncio.run(phase(model, args, images, 100 * (images + 1)))
                print(
                    f"{name:>20}: ITL p50 {statistics.median(gaps):.2f} ms, p95 {pct(gaps, 0.95):.2f} ms, "
                    f"max {max(gaps):.2f} ms over {len(gaps)} gaps"
                    + (f"; image TTFT {', '.join(f'{t:.0f}' for t in ttft)} ms" if ttft else "")
                )
        finally:
            model.close()


if __name__ == "__main__":
    main()
