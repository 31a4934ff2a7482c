"""Images on every dialect, before any engine runs them: Go's base64 errors as Ollama passes them
on, each dialect's own wording, a model that cannot see, a model with a projector (``/api/show``),
and where each image goes in a prompt (Ollama's ``[img-N]`` tags, then the projector's marker).
"""

from __future__ import annotations

import base64
import copy
import json
import time

import pytest
from conftest import MODEL
from starlette.testclient import TestClient

from cllm_ollama.api.media import (
    PART_PLACEHOLDER,
    Base64Error,
    Media,
    b64decode_go,
    decode_media,
    place_markers,
    tag_media,
)
from cllm_ollama.testing.images import png

# Go's own table (encoding/base64 TestDecodeCorrupt): input, offset of the error or None.
GO_CORRUPT = [
    ("", None),
    ("\n", None),
    ("AAA=\n", None),
    ("AAAA\n", None),
    ("!!!!", 0),
    ("====", 0),
    ("x===", 1),
    ("=AAA", 0),
    ("A=AA", 1),
    ("AA=A", 2),
    ("AA==A", 4),
    ("AAA=AAAA", 4),
    ("AAAAA", 4),
    ("AAAAAA", 4),
    ("A=", 1),
    ("A==", 1),
    ("AA=", 3),
    ("AA==", None),
    ("AAA=", None),
    ("AAAA", None),
    ("AAAAAA=", 7),
    ("YWJjZA=====", 8),
    ("A!\n", 1),
    ("A=\n", 1),
]


@pytest.mark.parametrize(("text", "offset"), GO_CORRUPT)
def test_base64_decodes_and_fails_where_go_does(text: str, offset: int | None) -> None:
    if offset is None:
        assert b64decode_go(text) == base64.b64decode(text.replace("\n", ""))
    else:
        with pytest.raises(Base64Error, match=f"^illegal base64 data at input byte {offset}$"):
            b64decode_go(text)


def test_base64_round_trips_every_length_and_skips_line_breaks() -> None:
    for n in range(40):
        data = bytes(range(n))
        encoded = base64.b64encode(data).decode()
        assert b64decode_go(encoded) == data
        assert b64decode_go("\r\n".join(encoded[i : i + 4] for i in range(0, len(encoded), 4))) == data
    # Python's lenient decoder takes these; Go's does not.
    for text in ("aGk", "aG k=", "aGk=\x00"):
        with pytest.raises(Base64Error):
            b64decode_go(text)


def test_a_large_image_decodes_in_c_and_a_large_bad_one_fails_fast() -> None:
    """An 8 MB upload is decoded by binascii; an invalid one walks Go's rules from its first bad
    byte only (a byte-by-byte walk of 8 MB would hold the event loop for seconds)."""
    data = bytes(range(256)) * (6 * 1024 * 1024 // 256)
    encoded = base64.b64encode(data).decode()
    started = time.perf_counter()
    assert b64decode_go(encoded) == data
    bad_at = len(encoded) - 3
    with pytest.raises(Base64Error, match=f"at input byte {bad_at}$"):
        b64decode_go(encoded[:bad_at] + "!" + encoded[bad_at + 1 :])
    with pytest.raises(Base64Error, match=f"at input byte {len(encoded) - 4}$"):
        b64decode_go(encoded[:-1])  # a partial last quantum: Go names where it starts
    assert time.perf_counter() - started < 2.0


def test_images_are_tagged_as_ollama_tags_them() -> None:
    a, b, c = (decode_media(text) for text in ("QQ==", "Qg==", "Qw=="))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": [a, b]},
        {"role": "assistant", "content": "Two cats."},
        {"role": "user", "content": "Compare [img] with the first.", "images": [c]},
    ]
    tagged, media = tag_media(messages, clear=True)
    assert media == [b"A", b"B", b"C"]
    assert [m["content"] for m in tagged] == [
        "Be brief.",
        "[img-0][img-1]What is this?",
        "Two cats.",
        "Compare [img-2] with the first.",
    ]
    assert all("images" not in m for m in tagged)
    assert messages[1]["images"] == ["QQ==", "Qg=="] and messages[1]["content"] == "What is this?"
    kept, _ = tag_media(messages)
    # Templates see the base64 the client sent, as in Ollama.
    assert kept[1] == {"role": "user", "content": "[img-0][img-1]What is this?", "images": ["QQ==", "Qg=="]}


def test_a_model_whose_renderer_places_images_gets_them_tagged_as_that_renderer_does() -> None:
    """Ollama leaves a renderer model's images untagged and the renderer tags them
    (``renderContentWithImageTags``): a space after tags put before text, content that already
    holds tags left as it is; tag numbers still count every item."""
    a, b, c, d = (decode_media(text) for text in ("QQ==", "Qg==", "Qw==", "RA=="))
    messages = [
        {"role": "user", "content": "extract text", "images": [a, b]},
        {"role": "user", "content": " spaced", "images": [c]},
        {"role": "user", "content": "Mine: [img-3]", "images": [d]},
        {"role": "user", "content": "", "images": [a]},
    ]
    tagged, media = tag_media(messages, renderer="glm-ocr")
    assert [m["content"] for m in tagged] == [
        "[img-0][img-1] extract text",  # prompt_test.go's "<|user|>\n[img-0][img-1] extract text"
        "[img-2] spaced",
        "Mine: [img-3]",
        "[img-4]",
    ]
    assert len(media) == 5
    plain, _ = tag_media(messages[:1], renderer="glm-4.7")  # a renderer that does not place images
    assert plain[0]["content"] == "[img-0][img-1]extract text"
    # Where content parts held the items (OpenAI's), their tags go there; text with its own tags
    # keeps them, and no part's place is left behind as text.
    parts = [{"role": "user", "content": f"A:\n\n{PART_PLACEHOLDER}\n\nB: [img]", "images": [a]}]
    assert tag_media(parts)[0][0]["content"] == "A:\n\n[img-0]\n\nB: [img]"
    own = [{"role": "user", "content": f"Mine: [img-0]\n\n{PART_PLACEHOLDER}", "images": [a]}]
    assert tag_media(own, renderer="glm-ocr")[0][0]["content"] == "Mine: [img-0]\n\n"


def test_media_is_decoded_once_where_its_dialect_decodes_it() -> None:
    """A request's media keep the text templates see and carry the bytes, so that nothing decodes
    them again (a large image decoded twice, the second time on the event loop)."""
    item = decode_media("aGk=")
    assert isinstance(item, Media) and item == "aGk=" and item.data == b"hi" and not item.is_audio
    assert json.dumps([item]) == '["aGk="]'  # what a Jinja worker is sent
    copied = copy.deepcopy(item)
    assert isinstance(copied, Media) and copied == item and copied.data == b"hi"


def test_markers_replace_tags_once_each_and_give_the_images_order() -> None:
    prompt, order = place_markers("<u>[img-1] then [img-0] and [img-0] [img-2]</u>", 2, "<M>")
    assert prompt == "<u><M> then <M> and [img-0] [img-2]</u>"
    assert order == [1, 0]
    # An image whose tag the template dropped is not lost: its marker goes first.
    prompt, order = place_markers("<u>[img-1] what?</u>", 3, "<M>")
    assert (prompt, order) == ("<M><M><u><M> what?</u>", [0, 2, 1])
    assert place_markers("text", 0, "<M>") == ("text", [])
    assert place_markers("[img-10][img-1]", 2, "<M>") == ("<M>[img-10]<M>", [0, 1])  # [img-1] is not in [img-10]


# --- over HTTP -------------------------------------------------------------------------------

GOOD = base64.b64encode(png(8, 8)).decode()
# What cllm said before vision and still says (Ollama today relays llama-server's own words instead).
NO_VISION = f"registry.ollama.ai/library/{MODEL}:latest does not support vision"
ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def user(content: object, **extra: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": content, **extra}]


def anthropic_image(data: str) -> list[dict[str, object]]:
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    return user([block, {"type": "text", "text": "What is it?"}])


def openai_image(url: str) -> list[dict[str, object]]:
    return user([{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is it?"}])


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/api/generate", {"prompt": "hi", "images": ["not base64!"]}, "illegal base64 data at input byte 3"),
        ("/api/generate", {"prompt": "hi", "images": ["aGk"]}, "illegal base64 data at input byte 0"),
        ("/api/chat", {"messages": user("hi", images=[GOOD, "aGk=="])}, "illegal base64 data at input byte 4"),
        ("/api/chat", {"messages": user("hi", images=[GOOD])}, NO_VISION),
        ("/api/generate", {"prompt": "hi", "images": [GOOD]}, NO_VISION),
    ],
)
def test_native_image_errors(client: TestClient, path: str, body: dict, message: str) -> None:
    r = client.post(path, json={"model": MODEL, "stream": False, **body})
    assert (r.status_code, r.json()) == (400, {"error": message})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "https://example.com/cat.png",
            "image URLs are not currently supported, please use base64 encoded data instead",
        ),
        (
            "http://example.com/cat.png",
            "image URLs are not currently supported, please use base64 encoded data instead",
        ),
        (f"data:image/gif;base64,{GOOD}", "invalid image input"),
        ("ftp://example.com/cat.png", "invalid image input"),
        ("data:image/png;base64,not base64!", "invalid image input"),
        (f"data:image/png;base64,{GOOD}", NO_VISION),
        (f"data:;base64,{GOOD}", NO_VISION),
        (f"data:image/jpg;base64,{GOOD}", NO_VISION),
    ],
)
def test_openai_image_url_errors(client: TestClient, url: str, message: str) -> None:
    r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": openai_image(url)})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("not base64!", "invalid base64 image data: illegal base64 data at input byte 3"),
        ("aGk", "invalid base64 image data: illegal base64 data at input byte 0"),
        (GOOD, NO_VISION),
    ],
)
def test_anthropic_image_errors(client: TestClient, data: str, message: str) -> None:
    body = {"model": MODEL, "max_tokens": 4, "messages": anthropic_image(data)}
    r = client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == message


def test_a_model_created_with_a_projector_shows_vision_and_the_projectors_info(seeing: TestClient) -> None:
    show = seeing.post("/api/show", json={"model": "eyes"}).json()
    assert "vision" in show["capabilities"] and "completion" in show["capabilities"]
    info = show["projector_info"]
    assert info["general.architecture"] == "clip"
    assert info["clip.projector_type"] == "gemma3"
    assert info["clip.vision.projection_dim"] == show["model_info"]["gemma3.embedding_length"]
    assert show["model_info"]["general.architecture"] == "gemma3"
    # Its Modelfile names the projector in a FROM of its own, so that it makes the model again.
    froms = [line for line in show["modelfile"].splitlines() if line.startswith("FROM ")]
    assert len(froms) == 2 and froms[0] != froms[1] and all("sha256-" in line for line in froms)


def test_a_model_without_a_projector_shows_none(client: TestClient) -> None:
    assert "projector_info" not in client.post("/api/show", json={"model": MODEL}).json()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/generate", {"prompt": "What is it?", "images": [GOOD]}),
        ("/api/chat", {"messages": user("What is it?", images=[GOOD])}),
        ("/v1/chat/completions", {"messages": openai_image(f"data:image/png;base64,{GOOD}")}),
        ("/v1/messages", {"messages": anthropic_image(GOOD), "max_tokens": 4}),
    ],
)
@pytest.mark.model
def test_images_to_a_model_that_sees_are_answered(seeing: TestClient, path: str, body: dict) -> None:
    r = seeing.post(path, json={"model": "eyes", "stream": False, **body}, headers=ANTHROPIC_HEADERS)
    assert r.status_code == 200, r.text
    # Bad base64 is still Go's error first, as in Ollama.
    bad = seeing.post("/api/generate", json={"model": "eyes", "prompt": "x", "images": ["aGk"], "stream": False})
    assert bad.json() == {"error": "illegal base64 data at input byte 0"}
