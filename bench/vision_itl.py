"""Running text streams' inter-token latency while an image's or an audio window's prompt is read,
against the same streams alone (issue 32's target: ITL p95 during the media's prefill <= 2x).

    python bench/vision_itl.py [--media image,audio] [--streams 2] [--rounds 3] [--tokens 200]
                               [--threads 4] [--layers 8] [--width 512] [--text-model GGUF]

Random-weight models big enough that decoding a media item's embeddings is felt on a CPU (not the
tests' 64-wide ones): an M-RoPE Qwen2-VL-shaped text model (``--layers`` x ``--width``) whose
projector makes a 448 px image 256 tokens, and a Qwen3-shaped one hearing through Qwen2-Audio's
projector, a 30 s window being 750 tokens (``--text-model``: a GGUF of one's own, such as a real
Qwen2.5, hears through a random projector as wide). Each loads in the real engine. ``--streams`` text
requests generate ``--tokens`` tokens alone, then generate while ``--rounds`` media requests
(distinct pictures or clips, one after another) run beside them, until the last one answers.

Printed per media kind: ITL p50/p95/max of the streams alone; of their gaps that end while a media
request waits for its first token (its encode, off the engine thread, and its decode, in pieces
within the step budget: "during prefill"); the p95 ratio against the 2x target; and the media
requests' time to first token. Timings on a shared machine are noisy: run it alone, and compare
the phases of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.audio_ggufs import write_qwen2a_projector
from cllm_ollama.testing.core_ggufs import write_qwen2vl, write_qwen2vl_projector, write_qwen3
from cllm_ollama.testing.gguf_base import Shape, VisionShape
from cllm_ollama.testing.images import png

# A one-block ViT over 448 px in 14 px patches (1024), merged 2 x 2: 256 image tokens.
VIT = VisionShape(image_size=448, patch_size=14, n_embd=256, n_head=4, n_ff=1024, merge=2)
TARGET = 2.0  # ITL p95 during a media prefill, at most this many times the streams' alone
GREEDY = SamplingParams(temperature=0)


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def gaps_during(times: Sequence[float], windows: Sequence[tuple[float, float]]) -> list[float]:
    """The gaps (ms) between a stream's token times that overlap one of ``windows`` (start, end): a
    stall that spans a whole window counts, as a gap that merely ends in one would miss it."""
    return [1e3 * (b - a) for a, b in itertools.pairwise(times) if any(a < end and b > start for start, end in windows)]


def all_gaps(times: Sequence[float]) -> list[float]:
    return [1e3 * (b - a) for a, b in itertools.pairwise(times)]


@dataclass
class Phase:
    """One phase's token times per answer of each stream and the media requests' (sent, first token) windows."""

    streams: list[list[float]] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)


def shapes(args: argparse.Namespace) -> Shape:
    """``--layers`` x ``--width``, heads of 16 (what the M-RoPE writer's rope sections assume)."""
    head_dim = 16
    n_head = max(1, args.width // head_dim)
    return Shape(
        n_layer=args.layers,
        n_embd=args.width,
        n_head=n_head,
        n_head_kv=max(1, n_head // 2),
        head_dim=head_dim,
        n_ff=3 * args.width,
    )


def write_models(kind: str, folder: Path, shape: Shape, text_model: Path | None = None) -> tuple[Path, Path]:
    """The text model and projector of ``kind``: image (M-RoPE Qwen2-VL) or audio (Qwen2-Audio);
    ``text_model``: a GGUF of one's own as audio's text model, with the projector made as wide."""
    if text_model is not None:
        if kind != "audio":
            raise SystemExit("--text-model serves audio only (an image's M-RoPE needs a Qwen2-VL text model)")
        width = gguf_info(text_model).embedding_length
        if width is None:
            raise SystemExit(f"{text_model} has no embedding length")
        return text_model, write_qwen2a_projector(folder / "mmproj.gguf", n_embd_text=width)
    if kind == "image":
        text = write_qwen2vl(folder / "text.gguf", shape=shape)
        return text, write_qwen2vl_projector(folder / "mmproj.gguf", n_embd_text=shape.n_embd, shape=VIT)
    text = write_qwen3(folder / "text.gguf", shape=shape, name="bench-qwen3-audio")
    return text, write_qwen2a_projector(folder / "mmproj.gguf", n_embd_text=shape.n_embd)


def medium(kind: str, seed: int) -> bytes:
    """A distinct 448 px picture, or a distinct 29 s clip: one audio window, 750 tokens (30 s
    spill into a second window)."""
    return png(448, 448, seed=seed) if kind == "image" else wav(29.0, seed=seed)


async def stream(model: LoadedModel, prompt: str, n: int, until: Callable[[], bool]) -> list[list[float]]:
    """A text stream's token times: ``n`` tokens, or on until ``until()`` says the phase is over,
    in answers of at most ``n`` tokens: the stream then asks again (as when a random model ends its
    answer early), so that its context is as deep beside the media as alone (a decode step of the
    bench's model 1,536 tokens deep took 5x one 32-64 deep, and had counted as the media's). Each answer's
    times are a list of their own (the gap across a new request is a first token, not an
    inter-token gap)."""
    segments: list[list[float]] = []
    while sum(map(len, segments)) < n or not until():
        times: list[float] = []
        segments.append(times)
        generator = model.generate(Request(tuple(model.tokenize(f"{prompt} {len(segments)}")), GREEDY, num_predict=n))
        try:
            async for event in generator:
                if event.tokens:
                    times.append(time.perf_counter())
                if sum(map(len, segments)) >= n and until():
                    break
        finally:
            await generator.aclose()  # a stream cut short is aborted
    return segments


async def ask(model: LoadedModel, data: bytes) -> tuple[float, float]:
    """One media request (``data``: a picture or a clip): when it was sent and when its first token came."""
    marker = model.media_marker
    assert marker is not None
    media = await asyncio.to_thread(model.tokenize_media, f"Look: {marker} What is it?", [data])
    request = Request(cell_keys(media.parts), GREEDY, num_predict=2, media=media)
    t0, first = time.perf_counter(), 0.0
    async for event in model.generate(request):
        if event.tokens and not first:
            first = time.perf_counter()
    return t0, first


async def phase(model: LoadedModel, args: argparse.Namespace, kind: str, rounds: int, seed: int) -> Phase:
    done = asyncio.Event()
    # Made before the streams start: a 29 s clip takes long enough to write that, on the event loop,
    # it delayed the streams' token times by up to 470 ms.
    media = [medium(kind, seed + i) for i in range(rounds)]
    streams = [stream(model, f"Tell a story number {i}.", args.tokens, done.is_set) for i in range(args.streams)]
    streams_task = asyncio.gather(*streams)

    async def media_meanwhile() -> list[tuple[float, float]]:
        try:
            await asyncio.sleep(0.2)  # the streams generate before the first media request
            return [await ask(model, data) for data in media]
        finally:
            done.set()

    segments, windows = await asyncio.gather(streams_task, media_meanwhile())
    return Phase([times for stream_segments in segments for times in stream_segments], windows)


def report(kind: str, alone: Phase, beside: Phase) -> str:
    base = [g for times in alone.streams for g in all_gaps(times)]
    during = [g for times in beside.streams for g in gaps_during(times, beside.windows)]
    ratio = pct(during, 0.95) / pct(base, 0.95)
    ttft = ", ".join(f"{1e3 * (first - sent):.0f}" for sent, first in beside.windows)
    return (
        f"{kind}: streams alone ITL p50 {statistics.median(base):.1f} ms, p95 {pct(base, 0.95):.1f} ms, "
        f"max {max(base):.1f} ms ({len(base)} gaps)\n"
        f"{kind}: during its prefill ITL p50 {statistics.median(during) if during else float('nan'):.1f} ms, "
        f"p95 {pct(during, 0.95):.1f} ms, max {max(during, default=float('nan')):.1f} ms ({len(during)} gaps); "
        f"p95 ratio {ratio:.2f}x (target <= {TARGET:.0f}x: {'met' if ratio <= TARGET else 'MISSED'}); "
        f"{kind} TTFT {ttft} ms"
    )


def run(kind: str, args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        text, proj = write_models(kind, Path(tmp), shapes(args), args.text_model)
        spec = LoadSpec(
            path=text,
            n_slots=args.streams + 1,
            n_ctx_slot=8192,
            n_threads=args.threads,
            projector=proj,
            target_itl_ns=int(args.target_itl_ms * 1e6),
            flash_attention={"auto": None, "on": True, "off": False}[args.flash_attention],
        )
        model = LoadedModel(spec, max_queue=8)
        try:
            asyncio.run(phase(model, args, kind, 1, 1000))  # warm up: the first encode allocates, costs get measured
            alone = asyncio.run(phase(model, args, kind, 0, 0))
            beside = asyncio.run(phase(model, args, kind, args.rounds, 100))
        finally:
            model.close()
    return report(kind, alone, beside)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--media", default="image,audio", help="comma-separated: image, audio")
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=200, help="tokens each stream generates at least")
    ap.add_argument("--rounds", type=int, default=3, help="media requests, one after another")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument(
        "--text-model", type=Path, help="audio only: this GGUF as the text model (e.g. a real one), a projector as wide"
    )
    ap.add_argument("--target-itl-ms", type=float, default=0.0, help="CLLM_TARGET_ITL (0: auto)")
    ap.add_argument("--flash-attention", choices=("auto", "on", "off"), default="auto", help="OLLAMA_FLASH_ATTENTION")
    args = ap.parse_args()
    for kind in args.media.split(","):
        print(run(kind.strip(), args), flush=True)


if __name__ == "__main__":
    main()
