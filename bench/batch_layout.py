"""Step time of one split-KV batch by row order (issue 7 "Batch layout").

    python bench/batch_layout.py [MODEL.gguf]

Eight sequences hold a 64-token prompt; then one step carries a decode token for seven of them
and a 64-token prompt chunk for the eighth, whose id is in the middle (2). llama.cpp cuts such
a batch into ubatches along runs of consecutive sequence ids with equal token counts
(``split_equal``): rows "decode first, then prefill" put id 2 after 7, which breaks the run;
rows in id order keep the seven decode tokens and the chunk's first token in one ubatch.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if path is None:
        from real_model import real_model_path  # tests/harness, through bench/real_model.py

        path = real_model_path()
    model = Model(path)
    ctx = Context(model, n_seq_max=8, n_ctx_seq=512, n_batch=512, n_threads=2)
    batch = Batch(512)
    prompt = [(i * 7919) % 1000 + 100 for i in range(64)]
    decoders = [0, 1, 3, 4, 5, 6, 7]
    rows_decode_first = [(s, 64, 5) for s in decoders] + [(2, p, prompt[p]) for p in range(64)]
    rows_by_id = sorted(rows_decode_first, key=lambda r: (r[0], r[1]))
    results: dict[str, list[float]] = {"decode rows first": [], "rows by sequence id": []}
    for _ in range(7):
        for name, rows in (("decode rows first", rows_decode_first), ("rows by sequence id", rows_by_id)):
            ctx.clear()
            for s in range(8):  # every sequence holds the prompt; sequence 2 will recompute it
                batch.fill(prompt, range(64), [s] * 64, [63])
                ctx.decode(batch)
            ctx.seq_clear(2)
            outputs = [i for i, r in enumerate(rows) if r[0] != 2] + [max(i for i, r in enumerate(rows) if r[0] == 2)]
            batch.fill([r[2] for r in rows], [r[1] for r in rows], [r[0] for r in rows], outputs)
            t0 = time.perf_counter()
            ctx.decode(batch)
            results[name].append((time.perf_counter() - t0) * 1000)
    for name, samples in results.items():
        print(f"{name}: median {statistics.median(samples):.1f} ms over {len(samples)} steps")
    ctx.close()
    model.close()


if __name__ == "__main__":
    main()
