"""Media in requests (images and audio): base64 decoded once, as Go decodes it, and where each
item goes in a prompt.

Ollama's clients send images as base64 (native ``images``, OpenAI data URLs, Anthropic ``source``
blocks), and audio the same way, in the same ``images`` (OpenAI's ``input_audio`` is carried
there too): the bytes say which they are (``Media.is_audio``). Go's decoder is stricter than
Python's lenient one (padding required, nothing but line breaks ignored) and its errors name the
offending byte, which Ollama passes on as they are. Each item is decoded once, where its dialect
decodes the request (``decode_media``); its bytes travel with the text templates see (``Media``).

Placement follows Ollama (``server/prompt.go`` ``imageTaggedMessages``): each item of a message
gets the tag ``[img-N]``, N counting items across the whole prompt, replacing the message's
``[img]`` placeholders in order or else prefixed to its content. The rendered prompt's tags are
then swapped for the projector's media marker, one each, in tag order.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Collection, Sequence
from typing import Any

from ..chatformat.renderer_templates import IMAGE_TAGGING_RENDERERS
from ..engine import audio
from ..errors import InvalidRequest

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
_PAD = ord("=")
_NEWLINES = (ord("\n"), ord("\r"))
_IRREGULAR = re.compile(rb"[^A-Za-z0-9+/\r\n]")
# Where an item goes in a prompt (``tag_media``), its number captured.
TAGS = re.compile(r"\[img-(0|[1-9][0-9]*)\]")


class Base64Error(ValueError):
    """Go's ``base64.CorruptInputError``: its text is Go's, byte offset included."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def b64decode_go(text: str) -> bytes:
    """``base64.StdEncoding.DecodeString`` (Go): the bytes, or ``Base64Error`` at Go's offset.

    Valid input (what clients send) decodes in C. Only invalid input walks Go's algorithm, and
    only from the quantum where the first byte that is neither base64 nor a line break stands.
    """
    src = text.encode("utf-8")
    compact = src.replace(b"\n", b"").replace(b"\r", b"")
    try:
        return binascii.a2b_base64(compact, strict_mode=True)
    except binascii.Error:
        pass
    irregular = _IRREGULAR.search(src)
    first = irregular.start() if irregular else len(src)
    before = src[:first]
    n_chars = len(before) - before.count(b"\n") - before.count(b"\r")
    whole = n_chars - n_chars % 4
    start, left = first, n_chars % 4  # back to the start of the quantum ``first`` falls in
    while left:
        start -= 1
        left -= src[start] not in _NEWLINES
    return _go_decode(src, start, bytearray(binascii.a2b_base64(compact[:whole], strict_mode=True)))


def _go_decode(src: bytes, si: int, out: bytearray) -> bytes:
    """Go's ``decodeQuantum`` loop from byte ``si`` on, appending to ``out``."""
    n = len(src)
    while True:
        quantum, j = [0, 0, 0, 0], 0
        while j < 4:
            if si == n:
                if j == 0:
                    return bytes(out)
                raise Base64Error(si - j)  # a partial quantum: StdEncoding wants it padded
            c = src[si]
            si += 1
            if c in _DECODE:
                quantum[j] = _DECODE[c]
                j += 1
            elif c in _NEWLINES:
                continue
            elif c != _PAD or j < 2:
                raise Base64Error(si - 1)
            else:
                if j == 2:  # "==" expected: the second "=" must follow (line breaks aside)
                    while si < n and src[si] in _NEWLINES:
                        si += 1
                    if si == n:
                        raise Base64Error(n)
                    if src[si] != _PAD:
                        raise Base64Error(si - 1)
                    si += 1
                while si < n and src[si] in _NEWLINES:
                    si += 1
                if si < n:
                    raise Base64Error(si)  # data after the padding
                break
        value = quantum[0] << 18 | quantum[1] << 12 | quantum[2] << 6 | quantum[3]
        out += value.to_bytes(3, "big")[: j - 1 if j < 4 else 3]
        if j < 4:
            return bytes(out)


class Media(str):
    """One item as the client sent it (base64: what templates see, as in Ollama), with its bytes
    decoded once (``data``), so that nothing decodes it again on the event loop."""

    data: bytes

    def __new__(cls, text: str, data: bytes) -> Media:
        item = super().__new__(cls, text)
        item.data = data
        return item

    def __getnewargs__(self) -> tuple[str, bytes]:  # type: ignore[override]
        """What ``copy`` and ``pickle`` rebuild it from (str's own would drop the bytes)."""
        return str(self), self.data

    @property
    def is_audio(self) -> bool:
        """Audio (WAV, MP3, FLAC) by its first bytes; anything else goes to the projector as an image."""
        return audio.is_audio(self.data)


def decode_media(text: str) -> Media:
    """``text`` (base64) decoded by Go's rules: the item, or ``Base64Error``."""
    return Media(text, b64decode_go(text))


def checked_media(data: object, *, not_a_string: str, invalid: str) -> Media:
    """``data`` decoded where it is a string of valid base64 (Go's decoder's rules), else
    ``InvalidRequest``: ``not_a_string``, or ``invalid`` with Go's error after it (its offending byte)."""
    if not isinstance(data, str):
        raise InvalidRequest(not_a_string)
    try:
        return decode_media(data)
    except Base64Error as exc:
        raise InvalidRequest(f"{invalid}: {exc}") from None


# Where a message's text places its next item (Ollama's chatPrompt replaces it with the item's
# ``[img-N]`` tag); without one, the tags go before the text.
IMAGE_PLACEHOLDER = "[img]"
# Where a dialect's content part held an item (``/v1/chat/completions``' parts keep their order):
# U+FFFC, Unicode's own placeholder for an object, which no client text holds (the dialect drops it).
PART_PLACEHOLDER = "\ufffc"


def tag_media(
    messages: Sequence[dict[str, Any]], *, clear: bool = False, renderer: str = ""
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Messages with ``[img-N]`` tags where their media go, and all items' bytes in tag order.

    The messages' ``images`` are ``Media`` (decoded by their dialect). The returned messages are
    copies (``clear`` drops their ``images``, as Ollama does for /api/generate; /api/chat keeps
    them for templates that look); the originals are left as they were. The model's ``renderer``,
    where it is one of those that place images themselves, tags them as it would
    (``renderContentWithImageTags``): content that already holds ``[img-`` tags is left as it
    is, and a space follows the tags put before text. A ``PART_PLACEHOLDER`` takes its item's tag
    where it stands.
    """
    spaced = renderer in IMAGE_TAGGING_RENDERERS
    tagged: list[dict[str, Any]] = []
    media: list[bytes] = []
    for message in messages:
        content = message.get("content") or ""
        prefix = ""
        own_tags = spaced and "[img-" in content
        for item in message.get("images") or ():
            tag = f"[img-{len(media)}]"
            media.append(item.data)
            if PART_PLACEHOLDER in content:  # where its part stood (none where the text tags its own)
                content = content.replace(PART_PLACEHOLDER, "" if own_tags else tag, 1)
            elif own_tags:
                continue
            elif IMAGE_PLACEHOLDER in content:
                content = content.replace(IMAGE_PLACEHOLDER, tag, 1)
            else:
                prefix += tag
        if spaced and prefix and content and not content[0].isspace():
            prefix += " "
        copy = {k: v for k, v in message.items() if not (clear and k == "images")}
        if message.get("images"):
            copy["content"] = prefix + content
        tagged.append(copy)
    return tagged, media


def place_markers(prompt: str, n_media: int, marker: str, dropped: Collection[int] = ()) -> tuple[str, list[int]]:
    """A rendered prompt with the first ``[img-N]`` tag of each item (N < ``n_media``) swapped
    for ``marker``, and the items' indexes in the order their markers now stand.

    The projector takes one marker per item and pairs them in order, so the caller passes the
    items in the returned order. An item whose tag the template dropped (or that a raw prompt
    never had) goes first rather than being lost, unless it is one of ``dropped`` (its turn was
    left out to fit the context). Other tags stay text.
    """
    spans: list[tuple[int, int, int]] = []
    for i in range(n_media):
        tag = f"[img-{i}]"
        at = prompt.find(tag)
        if at >= 0:
            spans.append((at, at + len(tag), i))  # tags end in "]" and start with "[": no overlaps
    placed = {i for _, _, i in spans}
    order = [i for i in range(n_media) if i not in placed and i not in dropped]
    pieces, last = [marker * len(order)], 0
    for start, end, i in sorted(spans):
        pieces += [prompt[last:start], marker]
        order.append(i)
        last = end
    pieces.append(prompt[last:])
    return "".join(pieces), order
