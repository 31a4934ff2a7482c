"""A Hugging Face tokenizer (``tokenizer.json``, ``tokenizer_config.json``) as llama.cpp's GGUF keys.

Byte-level BPE, the tokenizer of Llama 3, Qwen 2 and 3 and most models since, as Ollama's
``convert/tokenizer.go`` reads it: the vocabulary and added tokens (special ones are control tokens),
the merges, the pre-tokenizer named by a digest of its split patterns, the special tokens, and the
chat template. Holes in the ids and rows the embedding has past the vocabulary are padding tokens.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from gguf import GGUFValueType, TokenType

from ..framework import KV
from .checkpoint import Checkpoint
from .errors import ImportRefused

log = logging.getLogger(__name__)

_STR = GGUFValueType.STRING
_U32 = GGUFValueType.UINT32
_BOOL = GGUFValueType.BOOL
_ARRAY = GGUFValueType.ARRAY

# sha256 of a tokenizer's Split patterns, concatenated -> llama.cpp's pre-tokenizer (Ollama's table).
_PRE_TOKENIZERS = {
    "d98f9631be1e9607a9848c26c1f9eac1aa9fc21ac6ba82a2fc0741af9780a48f": "llama-bpe",
    "03df5c5863ad70781dcfdef491ead25140f895fe8010964be0daefe27be32b02": "deepseek-llm",
    "21cde974d587f0d54dc8d56b183cc1e6239600172035c68fbd6d4b9f8da0576e": "deepseek-coder",
    "1ff7f41064896984db5d1bb6ff64fa4bc29007d08c1b439e505b7392777a319e": "qwen2",
    "00431aed57e696b747435f734d1e3b9b1bfd931a121fb5cac7129e97c181e9ba": "qwen35",
}
_NO_SPLIT = hashlib.sha256(b"").hexdigest()
# tokenizer_config.json's names -> llama.cpp's key names (``tokenizer.ggml.<key>_token_id``).
_SPECIAL = {
    "bos": "bos",
    "eos": "eos",
    "unk": "unknown",
    "sep": "seperator",
    "pad": "padding",
    "cls": "cls",
    "mask": "mask",
}


def tokenizer_kv(checkpoint: Checkpoint, config: Mapping[str, Any], n_vocab: int) -> KV:
    """The ``tokenizer.*`` keys for the checkpoint's model, whose embedding has ``n_vocab`` rows."""
    spec = checkpoint.json("tokenizer.json")
    if spec is None:
        why = (
            "its tokenizer is SentencePiece's tokenizer.model"
            if checkpoint.has("tokenizer.model")
            else "it has no tokenizer.json"
        )
        raise ImportRefused(f"cllm converts models with a byte-level BPE tokenizer.json; {why}")
    model: dict[str, Any] = spec["model"] if isinstance(spec.get("model"), dict) else {}
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise ImportRefused(
            "cllm converts models with a byte-level BPE tokenizer.json "
            f"(Llama 3, Qwen); this one is {model.get('type')!r}"
            + (" with byte fallback (SentencePiece-style)" if model.get("byte_fallback") else "")
        )
    tokens, types, added = _vocabulary(model, spec.get("added_tokens") or [], n_vocab)
    kv: KV = {
        "tokenizer.ggml.model": ("gpt2", _STR),
        "tokenizer.ggml.pre": (_pre_tokenizer(spec.get("pre_tokenizer")), _STR),
        "tokenizer.ggml.tokens": (tokens, _ARRAY),
        "tokenizer.ggml.token_type": (types, _ARRAY),
    }
    merges = _merges(model.get("merges") or [])
    if merges:
        kv["tokenizer.ggml.merges"] = (merges, _ARRAY)
    kv |= _special_tokens(checkpoint, config, spec, added, len(tokens))
    template = chat_template(checkpoint)
    if template:
        kv["tokenizer.chat_template"] = (template, _STR)
    return kv


def _vocabulary(model: dict[str, Any], added: list[Any], n_vocab: int) -> tuple[list[str], list[int], dict[str, int]]:
    """Tokens and their types by id: the BPE vocabulary, then the added tokens (special ones control
    tokens, others user-defined), every id up to ``n_vocab`` filled."""
    by_id: dict[int, tuple[str, TokenType]] = {}
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ImportRefused("tokenizer.json has no vocabulary")
    for text, tid in vocab.items():
        by_id[int(tid)] = (text, TokenType.NORMAL)
    ids: dict[str, int] = {}
    for item in added:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("content"), str)
            or not isinstance(item.get("id"), int)
        ):
            raise ImportRefused("tokenizer.json has an added token with no content or id")
        kind = TokenType.CONTROL if item.get("special") else TokenType.USER_DEFINED
        by_id[item["id"]] = (item["content"], kind)
        ids[item["content"]] = item["id"]
    size = max(n_vocab, max(by_id, default=-1) + 1)
    if size > n_vocab:
        raise ImportRefused(f"the tokenizer has {size} tokens, the model's embedding only {n_vocab} rows")
    if min(by_id, default=0) < 0:
        raise ImportRefused("tokenizer.json has a negative token id")
    tokens, types = [], []
    for tid in range(size):
        text, kind = by_id.get(tid, (f"[PAD{tid}]", TokenType.UNUSED))
        tokens.append(text)
        types.append(int(kind))
    return tokens, types, ids


def _merges(merges: list[Any]) -> list[str]:
    """Merges as llama.cpp keeps them, ``"a b"``; tokenizers writes them so or, since 0.20, as pairs."""
    out = []
    for merge in merges:
        if isinstance(merge, str):
            out.append(merge)
        elif isinstance(merge, list) and len(merge) == 2 and all(isinstance(p, str) for p in merge):
            out.append(f"{merge[0]} {merge[1]}")
        else:
            raise ImportRefused("tokenizer.json's merges are neither strings nor pairs of strings")
    return out


def _pre_tokenizer(pre: Any) -> str:
    """llama.cpp's name for the pre-tokenizer, from a digest of its Split patterns (Ollama's way):
    "default" (GPT-2's) for one it does not know, as Ollama converts it, with a warning."""
    steps = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    digest = hashlib.sha256()
    for step in steps:
        pattern = step.get("pattern") if isinstance(step, dict) and step.get("type") == "Split" else None
        if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
            digest.update(pattern["Regex"].encode())
    name = _PRE_TOKENIZERS.get(digest.hexdigest())
    if name is None and digest.hexdigest() != _NO_SPLIT:
        log.warning("unknown pre-tokenizer (digest %s): GPT-2's is used, as Ollama does", digest.hexdigest())
    return name or "default"


def _special_tokens(
    checkpoint: Checkpoint, config: Mapping[str, Any], spec: dict[str, Any], added: dict[str, int], n: int
) -> KV:
    """bos, eos and the others by their text in tokenizer_config.json (an added token), else by id
    in config.json (as llama.cpp's converter falls back); whether a bos or eos is added to prompts."""
    settings = checkpoint.json("tokenizer_config.json") or {}
    kv: KV = {}
    for name, key in _SPECIAL.items():
        content = settings.get(f"{name}_token")
        if isinstance(content, dict):
            content = content.get("content")
        tid = added.get(content) if isinstance(content, str) else None
        if tid is None and isinstance(config.get(f"{name}_token_id"), int):
            tid = config[f"{name}_token_id"]
        if tid is not None and 0 <= tid < n:
            kv[f"tokenizer.ggml.{key}_token_id"] = (tid, _U32)
    for name in ("bos", "eos"):
        flag = settings.get(f"add_{name}_token")
        if flag is None and name == "bos":
            flag = _template_adds_bos(spec)
        if isinstance(flag, bool):
            kv[f"tokenizer.ggml.add_{name}_token"] = (flag, _BOOL)
    return kv


def _template_adds_bos(spec: dict[str, Any]) -> bool | None:
    """Whether tokenizer.json's post-processor puts a special token before every text (Llama 3's
    TemplateProcessing, where tokenizer_config.json says nothing)."""
    post = spec.get("post_processor")
    steps = post.get("processors", [post]) if isinstance(post, dict) else []
    for step in steps:
        if isinstance(step, dict) and step.get("type") == "TemplateProcessing":
            single = step.get("single")
            return (
                isinstance(single, list)
                and bool(single)
                and isinstance(single[0], dict)
                and "SpecialToken" in single[0]
            )
    return None


def chat_template(checkpoint: Checkpoint) -> str | None:
    """The chat template: tokenizer_config.json's (a string, or the one named "default" of a
    list), else the ``chat_template.jinja`` or ``chat_template.json`` transformers writes beside it."""
    settings = checkpoint.json("tokenizer_config.json") or {}
    template = settings.get("chat_template")
    if isinstance(template, list):
        template = next(
            (t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None
        )
    if isinstance(template, str) and template:
        return template
    if checkpoint.has("chat_template.jinja"):
        return checkpoint.text("chat_template.jinja")
    separate = checkpoint.json("chat_template.json") or {}
    return separate.get("chat_template") if isinstance(separate.get("chat_template"), str) else None
