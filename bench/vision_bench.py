"""The vision workload (issue 17): users each chatting about their own picture, cllm against
``llama-server --mmproj``.

Both serve the same random-weight gemma3 and bench-size projector (``make_model.ensure_vision_model``):
cllm with the projector as the model's ``projector`` layer (a Modelfile with two FROMs), llama-server
with ``--mmproj`` and ``-np N`` (``compare.prefix_outcomes``). Every turn re-sends the whole
conversation, the picture included, as Open WebUI does: the first turn pays for the encode, a
follow-up need not. ``cllm bench --workload vision`` sends it; ``report.vision_table`` reports it.
"""

from __future__ import annotations

from plan import PrefixPlan

MODEL_NAME = "bench-gemma3-vision"


def describe(pp: PrefixPlan) -> str:
    return (
        f"{pp.vision_users} users at once, {pp.vision_turns} turns each: a 448x448 picture of its own (a "
        f"random-pixel PNG) in the first message and a ~{pp.user_tokens}-token question, every turn re-sending "
        f"the whole conversation with the picture, at most {pp.vision_max_tokens} tokens per answer. Model: a "
        "random-weight gemma3 the size of Qwen3-0.6B (Qwen's tokenizer, Q4_K_M) with a random-weight "
        "projector of bench size (`bench/make_model.py`: a ViT-B/14 width, 6 blocks, over 448 px, 256 image "
        "tokens; ~1 s per encode on 2 cores where Gemma 3's real tower costs ~30x more). Follow-up TTFT "
        "is what re-sending an image costs: cllm finds it by the hash of its bytes in the slot's KV."
    )
