"""A Hugging Face tokenizer (``tokenizer.json`` or ``tokenizer.model``, ``tokenizer_config.json``)
as llama.cpp's GGUF keys.

Byte-level BPE, the tokenizer of Llama 3, Qwen 2 and 3 and most models since, as Ollama's
``convert/tokenizer.go`` reads it: the vocabulary and added tokens (special ones are control tokens),
the merges, the pre-tokenizer named by a digest of its split patterns. SentencePiece (Llama 2,
Mistral 7B, Gemma) as llama.cpp's converter reads it: pieces, scores and types, from the
``tokenizer.model``, or from the tokenizer.json transformers 5 saves alone. Then the special
tokens and the chat template. Holes in the ids and rows the embedding has past the vocabulary are
padding tokens.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any

from gguf import GGUFValueType, TokenType

from ..framework import KV
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .sentencepiece import pieces

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
    "b92c0824a58e1d8dc3221cf3e12c433c3a86f57e46d57229993489f0798e7702": "laguna",
}
# Mistral's Tekken (Nemo, Small 3, Pixtral), which Ollama's table lacks: its split pattern as
# llama.cpp's llama-vocab.cpp quotes it from tokenizer.json.
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# GPT-4o's (o200k: Phi-4-mini, and others since), which Ollama's table lacks too; as llama-vocab.cpp quotes it.
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_PRE_TOKENIZERS[hashlib.sha256(_TEKKEN.encode()).hexdigest()] = "tekken"
_PRE_TOKENIZERS[hashlib.sha256(_GPT4O.encode()).hexdigest()] = "gpt-4o"
_NO_SPLIT = hashlib.sha256(b"").hexdigest()
# Gemma 4's tokens that llama.cpp's converter makes user-defined (``Gemma4Model.set_vocab``).
_GEMMA4_VISIBLE = frozenset(
    ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>')
)
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# A chat template that only includes the one saved beside it (``{% include 'chat_template.jinja' %}``).
_INCLUDES_FILE = re.compile(r"\s*\{%-?\s*include\s+['\"]chat_template\.jinja['\"]\s*-?%\}\s*")
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


def tokenizer_kv(
    checkpoint: Checkpoint,
    config: Mapping[str, Any],
    rows: int,
    *,
    pad: bool = True,
    kind: str | None = None,
    pre: str | None = None,
    turn_ends: Mapping[str, str] | None = None,
) -> KV:
    """The ``tokenizer.*`` keys for the checkpoint's model, whose embedding has ``rows`` rows: a
    SentencePiece ``tokenizer.model`` where there is one (as both Ollama's and llama.cpp's converters
    prefer it), else a byte-level BPE ``tokenizer.json`` (or, ``kind`` "gemma4", Gemma 4's
    SentencePiece-style BPE). ``pad``: ids up to ``rows`` the tokenizer lacks are padding tokens
    (else the vocabulary ends where the tokenizer's does). ``pre``: the family's pre-tokenizer,
    whatever tokenizer.json's split patterns (GLM's are Llama 3's, which llama.cpp runs with a
    bos); ``turn_ends``: llama.cpp's ``eot`` and ``eom`` tokens by their text, where there are."""
    spec = checkpoint.json("tokenizer.json") or {}
    wordpiece = isinstance(spec.get("model"), dict) and spec["model"].get("type") == "WordPiece"
    if kind == "gemma4":
        kv = _gemma4_vocabulary(checkpoint, rows, pad)
    elif checkpoint.has("tokenizer.model"):
        kv = _sentencepiece_vocabulary(checkpoint, rows, pad)
    elif wordpiece:
        kv = _wordpiece_vocabulary(spec, rows, pad)
    else:
        kv = _bpe_vocabulary(checkpoint, rows, pad, pre)
    tokens: list[str] = kv["tokenizer.ggml.tokens"][0]
    kv |= _special_tokens(checkpoint, config, tokens)
    ids = _first_ids(tokens)
    types: list[int] = kv["tokenizer.ggml.token_type"][0]
    for key, text in (turn_ends or {}).items():
        if text in ids:
            kv[f"tokenizer.ggml.{key}_token_id"] = (ids[text], _U32)
            types[ids[text]] = int(TokenType.CONTROL)  # never shown (Laguna's </assistant> is saved unspecial)
    if pre in ("glm4", "chatglm-bpe"):  # llama.cpp runs GLM's vocabulary without a bos: none may be added
        kv["tokenizer.ggml.add_bos_token"] = (False, _BOOL)
    if wordpiece:  # a text is [CLS] ... [SEP]: llama.cpp's bos and eos, as its converter gives them
        for key, name in (("bos", "cls"), ("eos", "seperator")):
            tid = kv.get(f"tokenizer.ggml.{name}_token_id")
            if tid is not None:
                kv.setdefault(f"tokenizer.ggml.{key}_token_id", tid)
    template = chat_template(checkpoint)
    if template:
        kv["tokenizer.chat_template"] = (template, _STR)
    return kv


def _bpe_vocabulary(checkpoint: Checkpoint, rows: int, pad: bool, pre: str | None) -> KV:
    spec = checkpoint.json("tokenizer.json")
    if spec is None:
        raise ImportRefused("the model folder has neither tokenizer.json nor tokenizer.model")
    model: dict[str, Any] = spec["model"] if isinstance(spec.get("model"), dict) else {}
    if model.get("type") == "BPE" and model.get("byte_fallback"):
        return _sentencepiece_json_vocabulary(spec, rows, pad)
    if model.get("type") != "BPE":
        raise ImportRefused(
            "cllm converts a BPE tokenizer.json or a SentencePiece tokenizer.model; "
            f"this tokenizer.json is {model.get('type')!r}"
        )
    tokens, types = _vocabulary(model, spec.get("added_tokens") or [], rows, pad)
    kv: KV = {
        "tokenizer.ggml.model": ("gpt2", _STR),
        "tokenizer.ggml.pre": (pre or _pre_tokenizer(spec.get("pre_tokenizer")), _STR),
        "tokenizer.ggml.tokens": (tokens, _ARRAY),
        "tokenizer.ggml.token_type": (types, _ARRAY),
    }
    merges = _merges(model.get("merges") or [])
    if merges:
        kv["tokenizer.ggml.merges"] = (merges, _ARRAY)
    return kv


def _sentencepiece_json_vocabulary(spec: dict[str, Any], rows: int, pad: bool) -> KV:
    """A SentencePiece BPE vocabulary (Llama 2's, Mistral 7B's, Gemma's) as transformers saves it in
    tokenizer.json alone, which transformers 5 does: the pieces and added tokens by id (those past
    the embedding's rows left out, as a tokenizer.model's are: Gemma 3 1B's image token), the
    ``<0xXX>`` pieces bytes and the unknown piece unknown as SentencePiece types them, user-defined
    pieces with their ``▁`` as spaces (Gemma's runs of spaces, which llama.cpp prints as stored),
    and each piece a merge makes scored by that merge's rank. transformers ranks the merges by the
    score of the piece each makes (``SentencePieceExtractor``), which is what llama.cpp's
    SentencePiece tokenizer merges by, highest first; pieces no merge makes (characters) score
    below them all, and added ones -1000, as a ``tokenizer.model``'s are written. A space goes before
    the text where the pre-tokenizer or normalizer puts SentencePiece's ``▁`` there."""
    model: dict[str, Any] = spec["model"]
    vocab = model.get("vocab")
    # Gemma's converter of transformers 4.38 named byte 0x09's piece "\t": llama.cpp falls back to it.
    if not isinstance(vocab, dict) or not all(
        f"<0x{b:02X}>" in vocab or (b == 9 and "\t" in vocab) for b in range(256)
    ):
        raise ImportRefused(
            "tokenizer.json is a BPE with byte fallback but without SentencePiece's 256 <0xXX> byte tokens "
            "to fall back on, which cllm does not convert"
        )
    _require_sentencepiece_splits(spec.get("pre_tokenizer"))
    added = [a for a in spec.get("added_tokens") or [] if not isinstance(a, dict) or _below(a.get("id"), rows)]
    tokens, types = _vocabulary(model, added, rows, pad)
    merges = _merges(model.get("merges") or [])
    made: dict[str, int] = {}
    for rank, merge in enumerate(merges):
        left, _, right = merge.partition(" ")
        made.setdefault(left + right, rank)
    if merges[:1] == ["\u2581 \u2581"] and tokens[259:260] == ["\u2581\u2581"] and len(vocab) == 32000:
        # Llama 2's "▁▁", scored -1e9 in its tokenizer.model: transformers 5 ranks it first where it
        # orders the merges by id (a LlamaTokenizer it converted), and it would be merged first.
        made["\u2581\u2581"] = len(merges)
    unknown, later, scores = model.get("unk_token"), len(merges) + 1, []
    for tid, text in enumerate(tokens):
        score = 0.0
        if types[tid] == TokenType.NORMAL and _BYTE_TOKEN.fullmatch(text):
            types[tid] = int(TokenType.BYTE)
        elif types[tid] == TokenType.NORMAL and text == unknown:
            types[tid] = int(TokenType.UNKNOWN)
        elif types[tid] == TokenType.NORMAL and text in made:
            score = -float(made[text])
        elif types[tid] == TokenType.NORMAL:
            score, later = -float(later), later + 1
        elif types[tid] == TokenType.CONTROL and text == unknown:
            types[tid] = int(TokenType.UNKNOWN)
        elif types[tid] in (TokenType.CONTROL, TokenType.USER_DEFINED):  # added: as a tokenizer.model's
            score = -1000.0
            if types[tid] == TokenType.USER_DEFINED:  # its spaces as llama.cpp's converter writes them
                tokens[tid] = text.replace("\u2581", " ")
        scores.append(score)
    return _sentencepiece_kv(tokens, scores, types) | {
        "tokenizer.ggml.add_space_prefix": (_adds_space_prefix(spec), _BOOL)
    }


def _sentencepiece_kv(tokens: list[str], scores: list[float], types: list[int]) -> KV:
    """A SentencePiece vocabulary's keys, as llama.cpp's converter writes them."""
    return {
        "tokenizer.ggml.model": ("llama", _STR),
        "tokenizer.ggml.pre": ("default", _STR),
        "tokenizer.ggml.tokens": (tokens, _ARRAY),
        "tokenizer.ggml.scores": (scores, _ARRAY),
        "tokenizer.ggml.token_type": (types, _ARRAY),
    }


def _below(tid: Any, rows: int) -> bool:
    """Whether an added token's id has a row in the embedding (anything else is left to
    ``_vocabulary`` to refuse)."""
    return not isinstance(tid, int) or tid < rows


def _require_sentencepiece_splits(pre: Any) -> None:
    """``ImportRefused`` for a pre-tokenizer that splits text before the merges otherwise than
    SentencePiece does (which llama.cpp's SentencePiece tokenizer cannot): Metaspace's, or Gemma's
    split at spaces its normalizer has already made ``▁``, or none."""
    for step in _steps(pre, "pretokenizers"):
        kind = step.get("type")
        spaces = kind == "Split" and step.get("pattern") == {"String": " "}
        if kind != "Metaspace" and not spaces:
            raise ImportRefused(
                f"tokenizer.json's pre-tokenizer {kind!r} splits text before its SentencePiece merges, "
                "which llama.cpp does not: add the base model's tokenizer.model to the folder"
            )


def _steps(part: Any, key: str) -> list[dict[str, Any]]:
    """A tokenizer.json part's steps: a Sequence's (under ``key``), or the part itself."""
    if not isinstance(part, dict):
        return []
    inner = part.get(key)
    return [step for step in inner if isinstance(step, dict)] if isinstance(inner, list) else [part]


def _adds_space_prefix(spec: dict[str, Any]) -> bool:
    """Whether tokenizer.json puts SentencePiece's ``▁`` before the text: a Metaspace pre-tokenizer
    that prepends it (transformers 5's), or a normalizer that does (transformers 4's Llama 2)."""
    for pre in _steps(spec.get("pre_tokenizer"), "pretokenizers"):
        scheme = pre.get("prepend_scheme", "always" if pre.get("add_prefix_space", True) else "never")
        if pre.get("type") == "Metaspace" and scheme in ("always", "first"):
            return True
    return any(
        n.get("type") == "Prepend" and n.get("prepend") == "\u2581"
        for n in _steps(spec.get("normalizer"), "normalizers")
    )


def _gemma4_vocabulary(checkpoint: Checkpoint, rows: int, pad: bool) -> KV:
    """Gemma 4's tokenizer.json as llama.cpp's converter writes it (``Gemma4Model.set_vocab``): BPE
    over text whose spaces are ``▁`` with ``<0xXX>`` byte tokens to fall back on, its merges, and
    the marks of thought channels, tool calls and their answers as user-defined tokens, which
    llama.cpp always renders so that a chat's parser sees them."""
    spec = checkpoint.json("tokenizer.json") or {}
    model: dict[str, Any] = spec["model"] if isinstance(spec.get("model"), dict) else {}
    if model.get("type") != "BPE" or not model.get("byte_fallback"):
        raise ImportRefused("Gemma 4's tokenizer.json must be BPE with byte fallback, as Google's releases have it")
    tokens, types = _vocabulary(model, spec.get("added_tokens") or [], rows, pad)
    for tid, text in enumerate(tokens):
        if text in _GEMMA4_VISIBLE:
            types[tid] = int(TokenType.USER_DEFINED)
        elif types[tid] == TokenType.NORMAL and _BYTE_TOKEN.fullmatch(text):
            types[tid] = int(TokenType.BYTE)
    kv: KV = {
        "tokenizer.ggml.model": ("gemma4", _STR),
        "tokenizer.ggml.tokens": (tokens, _ARRAY),
        "tokenizer.ggml.scores": ([-1000.0] * len(tokens), _ARRAY),
        "tokenizer.ggml.token_type": (types, _ARRAY),
        "tokenizer.ggml.merges": (_merges(model.get("merges") or []), _ARRAY),
        "tokenizer.ggml.add_bos_token": (True, _BOOL),  # llama.cpp adds it to Gemma 4's prompts whatever is said
    }
    return kv


def _sentencepiece_vocabulary(checkpoint: Checkpoint, rows: int, pad: bool) -> KV:
    """The pieces, scores and types of ``tokenizer.model``, then the added tokens of
    ``added_tokens.json`` and ``tokenizer_config.json`` (llama.cpp's ``_create_vocab_sentencepiece``)."""
    model = pieces(checkpoint.data("tokenizer.model"))
    if len(model) > rows:
        raise ImportRefused(f"the tokenizer has {len(model)} tokens, the model's embedding only {rows} rows")
    _padding_fits(len(model), rows)
    size = rows if pad else len(model)
    tokens = [f"[PAD{i}]" for i in range(size)]
    scores, types = [-10000.0] * size, [int(TokenType.UNUSED)] * size
    for tid, (piece, score, kind) in enumerate(model):
        tokens[tid], scores[tid], types[tid] = piece, score, kind
    added = checkpoint.json("added_tokens.json") or {}
    for text, tid in added.items():
        if isinstance(tid, int) and 0 <= tid < size:
            tokens[tid], scores[tid], types[tid] = text, -1000.0, int(TokenType.USER_DEFINED)
    decoder = (checkpoint.json("tokenizer_config.json") or {}).get("added_tokens_decoder")
    for key, token in (decoder or {}).items() if isinstance(decoder, dict) else ():
        if not (str(key).isdigit() and isinstance(token, dict) and isinstance(token.get("content"), str)):
            continue
        tid, text = int(key), token["content"]
        if tid >= size:
            continue
        if token.get("special"):
            types[tid] = int(TokenType.CONTROL)
        else:  # user-defined spaces pre-normalized, as llama.cpp's converter writes them
            text, types[tid] = text.replace("\u2581", " "), int(TokenType.USER_DEFINED)
        tokens[tid], scores[tid] = text, -1000.0
    return _sentencepiece_kv(tokens, scores, types)


def _wordpiece_vocabulary(spec: dict[str, Any], rows: int, pad: bool) -> KV:
    """BERT's WordPiece vocabulary as llama.cpp's converter writes it (``BertModel.set_vocab``): a
    word's first piece with a phantom space before it (``▁``), a continuation (``##ing``)
    without its marks, control tokens as they are."""
    model: dict[str, Any] = spec["model"]
    if model.get("continuing_subword_prefix", "##") != "##":
        raise ImportRefused("tokenizer.json's WordPiece marks continuations otherwise than with ##")
    tokens, types = _vocabulary(model, spec.get("added_tokens") or [], rows, pad)
    for i, (text, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind not in (TokenType.CONTROL, TokenType.UNUSED):
            tokens[i] = text[2:] if text.startswith("##") else "\u2581" + text
    return {
        "tokenizer.ggml.model": ("bert", _STR),
        "tokenizer.ggml.pre": ("default", _STR),
        "tokenizer.ggml.tokens": (tokens, _ARRAY),
        "tokenizer.ggml.token_type": (types, _ARRAY),
    }


def _vocabulary(model: dict[str, Any], added: list[Any], rows: int, pad: bool) -> tuple[list[str], list[int]]:
    """Tokens and their types by id: the BPE vocabulary, then the added tokens (special ones control
    tokens, others user-defined), every id up to the last (up to ``rows`` with ``pad``) filled."""
    by_id: dict[int, tuple[str, TokenType]] = {}
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ImportRefused("tokenizer.json has no vocabulary")
    for text, tid in vocab.items():
        by_id[int(tid)] = (text, TokenType.NORMAL)
    for item in added:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("content"), str)
            or not isinstance(item.get("id"), int)
        ):
            raise ImportRefused("tokenizer.json has an added token with no content or id")
        by_id[item["id"]] = (item["content"], TokenType.CONTROL if item.get("special") else TokenType.USER_DEFINED)
    size = max(by_id, default=-1) + 1
    if size > rows:
        raise ImportRefused(f"the tokenizer has {size} tokens, the model's embedding only {rows} rows")
    if min(by_id, default=0) < 0:
        raise ImportRefused("tokenizer.json has a negative token id")
    _padding_fits(size, rows)
    tokens, types = [], []
    for tid in range(rows if pad else size):
        text, kind = by_id.get(tid, (f"[PAD{tid}]", TokenType.UNUSED))
        tokens.append(text)
        types.append(int(kind))
    return tokens, types


def _padding_fits(tokens: int, rows: int) -> None:
    """Refuse an embedding far larger than its vocabulary (real ones pad a few hundred rows): each
    row past it would be a padding token held in memory, which a crafted checkpoint could make
    millions of."""
    if rows - tokens > max(tokens, 4096):
        raise ImportRefused(f"the model's embedding has {rows} rows for a tokenizer of {tokens} tokens")


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
    steps = _steps(pre, "pretokenizers")
    digest = hashlib.sha256()
    for step in steps:
        pattern = step.get("pattern") if step.get("type") == "Split" else None
        if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
            digest.update(pattern["Regex"].encode())
    name = _PRE_TOKENIZERS.get(digest.hexdigest())
    if name is None and digest.hexdigest() == _NO_SPLIT and _splits_digits_then_gpt2(steps):
        name = "command-r"
    if name is None and digest.hexdigest() != _NO_SPLIT:
        log.warning("unknown pre-tokenizer (digest %s): GPT-2's is used, as Ollama does", digest.hexdigest())
    return name or "default"


def _splits_digits_then_gpt2(steps: list[dict[str, Any]]) -> bool:
    """Cohere's pre-tokenizer: every digit apart, then GPT-2's split (a ByteLevel with its regex),
    llama.cpp's "command-r" (Ollama's table has no Split pattern for it, and falls back to GPT-2's
    alone, which keeps numbers whole)."""
    return (
        len(steps) == 2
        and steps[0].get("type") == "Digits"
        and steps[0].get("individual_digits") is True
        and steps[1].get("type") == "ByteLevel"
        and steps[1].get("use_regex", True) is True
    )


def _special_tokens(checkpoint: Checkpoint, config: Mapping[str, Any], tokens: list[str]) -> KV:
    """bos, eos and the others by their text in tokenizer_config.json, else by id in config.json (as
    llama.cpp's converter falls back); whether a bos or eos is added to prompts."""
    settings = checkpoint.json("tokenizer_config.json") or {}
    ids = _first_ids(tokens)
    kv: KV = {}
    for name, key in _SPECIAL.items():
        content = settings.get(f"{name}_token")
        if isinstance(content, dict):
            content = content.get("content")
        tid = ids.get(content) if isinstance(content, str) else None
        if tid is None and isinstance(config.get(f"{name}_token_id"), int):
            tid = config[f"{name}_token_id"]
        if tid is not None and 0 <= tid < len(tokens):
            kv[f"tokenizer.ggml.{key}_token_id"] = (tid, _U32)
    for name in ("bos", "eos"):
        flag = settings.get(f"add_{name}_token")
        if flag is None and name == "bos":
            flag = _template_adds_bos(checkpoint.json("tokenizer.json") or {})
        if isinstance(flag, bool):
            kv[f"tokenizer.ggml.add_{name}_token"] = (flag, _BOOL)
    if isinstance(settings.get("add_prefix_space"), bool):  # as llama.cpp's converter reads it
        kv["tokenizer.ggml.add_space_prefix"] = (settings["add_prefix_space"], _BOOL)
    return kv


def _first_ids(tokens: list[str]) -> dict[str, int]:
    """Each token's text -> its first id (a vocabulary may hold a text twice)."""
    return {text: tid for tid, text in reversed(list(enumerate(tokens)))}


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
    list), else the ``chat_template.jinja`` or ``chat_template.json`` transformers writes beside it;
    one that only includes ``chat_template.jinja`` (Laguna's) is that file's text, as llama.cpp's
    converter resolves it (the server's Jinja has no files to include)."""
    settings = checkpoint.json("tokenizer_config.json") or {}
    template = settings.get("chat_template")
    if isinstance(template, list):
        template = next(
            (t.get("template") for t in template if isinstance(t, dict) and t.get("name") == "default"), None
        )
    if isinstance(template, str) and _INCLUDES_FILE.fullmatch(template) and checkpoint.has("chat_template.jinja"):
        return checkpoint.text("chat_template.jinja")
    if isinstance(template, str) and template:
        return template
    if checkpoint.has("chat_template.jinja"):
        return checkpoint.text("chat_template.jinja")
    separate = checkpoint.json("chat_template.json") or {}
    return separate.get("chat_template") if isinstance(separate.get("chat_template"), str) else None
