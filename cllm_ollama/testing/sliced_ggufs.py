"""A tiny model whose projector slices a large image into tiles with text between them: Idefics3
(SmolVLM) as llama.cpp's converter writes its projector, beside a tiny Qwen3 text model.

libmtmd turns an image larger than one tile into one chunk per tile and a last one for the
whole picture scaled down (``mtmd.cpp`` ``add_media``), each tile after a text run that names
its row and column (``<fake_token_around_image><row_1_col_2>``): the case where the chunks of one
image are not consecutive. The chunks' embeddings differ, so the engine must tell them apart.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .core_ggufs import write_qwen3
from .gguf_base import TINY, TINY_VISION, Vocab, finish, projector_header, synthetic_vocab, vit_block, with_tokens

# Idefics3's image text, which libmtmd looks up as single tokens of the text model's vocabulary
# (a missing one would be token -1 in the prompt).
IDEFICS3_TOKENS = ("<fake_token_around_image>", "<global-img>")
# The longest side an image is scaled to before it is cut into ``image_size`` tiles: up to 2 x 2.
LONGEST_EDGE = 2 * TINY_VISION.image_size


def idefics3_vocab() -> Vocab:
    """``synthetic_vocab`` with Idefics3's image tokens and a token for a blank line (``\\n\\n``)."""
    v = with_tokens(synthetic_vocab(), IDEFICS3_TOKENS)
    # byte-level BPE's text for "\n\n"
    return v if "ĊĊ" in v.tokens else with_tokens(v, ["ĊĊ"], gguf.TokenType.NORMAL)


def write_idefics3_projector(path: Path, *, n_embd_text: int = TINY.n_embd, seed: int = 0) -> Path:
    """An Idefics3 projector: a SigLIP ViT, a pixel shuffle by 2 and one projection into the text
    model. A tile is ``TINY_VISION``'s 32 px: 4 image tokens; an image is scaled to a longest side
    of ``LONGEST_EDGE`` and cut into tiles, then once more whole as the overview."""
    v = TINY_VISION
    t = projector_header(path, v, "idefics3", n_embd_text, seed)
    t.w.add_vision_projector_scale_factor(v.merge)
    t.w.add_uint32("clip.vision.preproc_image_size", LONGEST_EDGE)
    t.f32("v.patch_embd.weight", t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2)
    t.f32("v.patch_embd.bias", np.zeros(v.n_embd))
    t.matrix("v.position_embd.weight", v.n_patches, v.n_embd)
    vit_block(t, v)
    t.matrix("mm.model.fc.weight", n_embd_text, v.n_embd * v.merge * v.merge)
    finish(t.w)
    return path


def write_sliced_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (a Qwen3 with ``idefics3_vocab``) and ``folder/mmproj.gguf``, its
    Idefics3 projector."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_qwen3(folder / "text.gguf", vocab=idefics3_vocab(), name="tiny-idefics3-text", seed=seed)
    return text, write_idefics3_projector(folder / "mmproj.gguf", seed=seed)
