"""Images end to end, through the official ``ollama``, ``openai`` and ``anthropic`` clients, on the
tiny vision models (a gemma3 with its projector: non-causal image tokens; a qwen2vl: M-RoPE).

A real server, a real llama.cpp with libmtmd: images accepted on every API, their tokens counted,
a re-sent image reused from the KV cache, and greedy output the same batched or alone, reused or cold.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from serving import create_from_files, serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ollama_ggufs import write_ollama_gemma3_vision, write_ollama_qwen25vl_vision

pytestmark = pytest.mark.model

IMAGE_TOKENS = 4  # the tiny projectors: a 32 px image is 4 tokens
GREEDY = {"temperature": 0, "num_predict": 8, "seed": 1}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose store has "eyes" (gemma3 + projector) and "eyes-vl" (qwen2vl + projector)."""
    root = tmp_path_factory.mktemp("vision-server")
    settings = Settings(models_dir=root / "models", num_parallel=4, context_length=512)
    with serve_in_thread(create_app(settings)) as url:
        for name, kind in (("eyes", "gemma3"), ("eyes-vl", "qwen2vl")):
            create_from_files(url, name, write_vision(root / kind, kind=kind))
        # One GGUF each in Ollama's converter layout (the vision tower inside): split at create.
        for name, write in (
            ("eyes-ollama", write_ollama_gemma3_vision),
            ("eyes-ollama-vl", write_ollama_qwen25vl_vision),
        ):
            data = write(root / f"{name}.gguf").read_bytes()
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code == 201
            body = {"model": name, "files": {"model.gguf": digest}, "stream": False}
            r = httpx.post(f"{url}/api/create", json=body, timeout=60)
            assert r.status_code == 200, r.text
        yield url


def unload(url: str, model: str) -> None:
    """Drop the model and every KV it holds: the next request runs cold."""
    ollama.Client(url).generate(model=model, prompt="", keep_alive=0)


def turn(image: bytes, question: str = "What is in this picture?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": question, "images": [image]}]


def test_an_image_is_seen_and_its_tokens_counted_on_generate_and_chat(server: str) -> None:
    client = ollama.Client(server)
    image = png(32, 32, seed=1)
    plain = client.generate(model="eyes", prompt="Describe it.", options=GREEDY)
    seen = client.generate(model="eyes", prompt="Describe it.", images=[image], options=GREEDY)
    assert seen.done and seen.eval_count and seen.eval_count > 0
    # The image's tokens count as prompt tokens (plus libmtmd's begin/end-of-image text tokens).
    assert seen.prompt_eval_count is not None and plain.prompt_eval_count is not None
    assert seen.prompt_eval_count >= plain.prompt_eval_count + IMAGE_TOKENS
    # The context handed back holds token ids only, which a next request may send back.
    assert seen.context and min(seen.context) >= 0
    chat = client.chat(model="eyes", messages=turn(image), options=GREEDY)
    assert chat.message.role == "assistant" and chat.prompt_eval_count and chat.prompt_eval_count > IMAGE_TOKENS
    other = client.generate(model="eyes", prompt="Describe it.", images=[png(32, 32, seed=2)], options=GREEDY)
    assert other.prompt_eval_count == seen.prompt_eval_count  # same size, another picture


@pytest.mark.parametrize("model", ["eyes", "eyes-vl"])
def test_a_resent_image_is_reused_and_answers_as_a_cold_run(server: str, model: str) -> None:
    """Turn 2 re-sends turn 1's image: its KV is reused (cached tokens), and greedy output equals a
    cold run of the same request on a freshly loaded model (M-RoPE positions included)."""
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    image = f"data:image/png;base64,{b64(png(32, 32, seed=3))}"
    first = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Look at this."}, {"type": "image_url", "image_url": {"url": image}}],
        }
    ]
    unload(server, model)
    one = client.chat.completions.create(model=model, messages=first, temperature=0, max_tokens=8, seed=1)
    follow = [*first, {"role": "assistant", "content": one.choices[0].message.content}]
    follow.append({"role": "user", "content": "And what colour is it?"})
    warm = client.chat.completions.create(model=model, messages=follow, temperature=0, max_tokens=8, seed=1)
    assert warm.usage is not None and warm.usage.prompt_tokens_details is not None
    cached = warm.usage.prompt_tokens_details.cached_tokens or 0
    assert cached > IMAGE_TOKENS  # the first turn, its image included, was not computed again
    unload(server, model)
    cold = client.chat.completions.create(model=model, messages=follow, temperature=0, max_tokens=8, seed=1)
    assert cold.usage is not None and (cold.usage.prompt_tokens_details.cached_tokens or 0) == 0  # type: ignore[union-attr]
    assert warm.choices[0].message.content == cold.choices[0].message.content
    assert warm.usage.prompt_tokens == cold.usage.prompt_tokens


@pytest.mark.parametrize("model", ["eyes", "eyes-vl"])
def test_image_requests_batched_answer_as_each_alone(server: str, model: str) -> None:
    client = ollama.Client(server)
    images = [png(32, 32, seed=10 + i) for i in range(4)]

    def ask(image: bytes) -> str:
        return client.chat(model=model, messages=turn(image), options=GREEDY).message.content or ""

    unload(server, model)
    alone = []
    for image in images:
        unload(server, model)  # nothing reused: each computed on its own
        alone.append(ask(image))
    unload(server, model)
    with ThreadPoolExecutor(len(images)) as pool:
        together = list(pool.map(ask, images))
    assert together == alone
    assert len(set(alone)) > 1  # the pictures make a difference to the answer


@pytest.mark.parametrize("model", ["eyes", "eyes-vl"])
def test_one_image_sent_by_many_at_once_is_computed_once_and_answers_as_alone(server: str, model: str) -> None:
    """Requests that arrive together with the same picture share its encode and its KV (one computes
    the prefix, the others wait and copy it): each answer equals the one computed alone."""
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    image = f"data:image/png;base64,{b64(png(32, 32, seed=7))}"
    long_text = "Please look very carefully at the following picture and describe it. " * 3
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": long_text}, {"type": "image_url", "image_url": {"url": image}}],
        }
    ]

    def ask(_: int) -> tuple[str, int]:
        r = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=8, seed=1)
        assert r.usage is not None and r.usage.prompt_tokens_details is not None
        return r.choices[0].message.content or "", r.usage.prompt_tokens_details.cached_tokens or 0

    unload(server, model)
    alone, _ = ask(0)
    unload(server, model)
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(ask, range(3)))
    assert [text for text, _ in together] == [alone] * 3
    assert sum(cached for _, cached in together) > IMAGE_TOKENS  # computed once, shared


def test_anthropic_image_blocks_are_seen(server: str) -> None:
    client = anthropic.Anthropic(base_url=server, api_key="x")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png(32, 32, seed=5))}}
    text = {"type": "text", "text": "What is this?"}
    usage = []
    for content in ([text], [image, text]):
        message = client.messages.create(model="eyes", max_tokens=8, messages=[{"role": "user", "content": content}])
        assert message.usage.output_tokens > 0
        usage.append(message.usage.input_tokens)
    assert usage[1] >= usage[0] + IMAGE_TOKENS


def test_responses_input_image_is_seen(server: str) -> None:
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    image = f"data:image/png;base64,{b64(png(32, 32, seed=6))}"
    content = [{"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": image}]
    usage = []
    for parts in (content[:1], content):
        response = client.responses.create(
            model="eyes", input=[{"role": "user", "content": parts}], max_output_tokens=8, temperature=0
        )  # type: ignore[call-overload]
        assert response.usage is not None
        usage.append(response.usage.input_tokens)
    assert usage[1] >= usage[0] + IMAGE_TOKENS


def test_bytes_that_are_no_image_are_refused_on_every_api(server: str) -> None:
    junk = b64(b"this is no picture at all")
    with pytest.raises(ollama.ResponseError) as native:
        ollama.Client(server).generate(model="eyes", prompt="x", images=[junk])
    assert native.value.status_code == 400 and "Failed to load image" in native.value.error
    with pytest.raises(openai.BadRequestError) as oai:
        openai.OpenAI(base_url=f"{server}/v1", api_key="x").chat.completions.create(
            model="eyes",
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{junk}"}}],
                }
            ],
        )
    assert "Failed to load image" in str(oai.value)
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": junk}}
    with pytest.raises(anthropic.BadRequestError) as anth:
        anthropic.Anthropic(base_url=server, api_key="x").messages.create(
            model="eyes", max_tokens=4, messages=[{"role": "user", "content": [block]}]
        )
    assert "Failed to load image" in str(anth.value)
    # The server is still whole: the next image request is answered.
    ok = ollama.Client(server).generate(model="eyes", prompt="x", images=[png(32, 32)], options=GREEDY)
    assert ok.done


def test_an_image_over_the_context_is_refused_not_cut(server: str) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(server).generate(
            model="eyes", prompt="word " * 600, images=[png(32, 32)], options={"num_ctx": 64}
        )
    assert err.value.status_code == 400


def test_a_context_sent_back_with_an_image_is_read_before_the_prompt(server: str) -> None:
    """Ollama's GenerateHandler writes a ``context`` out as text before the prompt, images or not:
    the next turn of an ``/api/generate`` conversation may send a picture too."""
    client = ollama.Client(server)
    image = png(32, 32, seed=3)
    first = client.generate(model="eyes", prompt="Describe it.", images=[image], options=GREEDY)
    assert first.context and first.prompt_eval_count
    second = client.generate(model="eyes", prompt="Describe it.", images=[image], context=first.context, options=GREEDY)
    assert second.done and second.prompt_eval_count is not None
    # The context's text, tokenized again, then the same turn: a random model's output, written
    # out, need not give back its own tokens (bytes that are no UTF-8 come back as U+FFFD).
    assert second.prompt_eval_count >= first.prompt_eval_count + len(first.context) // 2
    # A context has no turns to drop: one too long for the context is refused, never cut.
    with pytest.raises(ollama.ResponseError) as err:
        client.generate(
            model="eyes", prompt="Hi", images=[image], context=first.context * 8, options=GREEDY | {"num_ctx": 64}
        )
    assert err.value.status_code == 400 and "longer than the context length" in str(err.value.error)
    with pytest.raises(ollama.ResponseError) as err:
        client.generate(model="eyes", prompt="Hi", images=[image], suffix="there", options=GREEDY)
    assert err.value.status_code == 400


def test_a_gemma3_in_ollamas_layout_sees_as_the_llama_cpp_files_do(server: str) -> None:
    """Created from one GGUF with the vision tower inside (Ollama's converter layout), the split
    model reports the vision capability and answers an image exactly as the two-file original."""
    client = ollama.Client(server)
    assert "vision" in (client.show("eyes-ollama").capabilities or [])
    image = png(32, 32, seed=7)
    answers = [client.chat(model=m, messages=turn(image), options=GREEDY) for m in ("eyes", "eyes-ollama")]
    assert answers[0].message.content == answers[1].message.content
    assert answers[0].prompt_eval_count == answers[1].prompt_eval_count


def test_a_qwen25vl_in_ollamas_layout_sees(server: str) -> None:
    """Created from one GGUF laid out as Ollama writes Qwen2.5-VL, the split model (a qwen2vl text
    model and a qwen2.5vl_merger projector: window attention, SwiGLU, M-RoPE) takes an image."""
    client = ollama.Client(server)
    assert "vision" in (client.show("eyes-ollama-vl").capabilities or [])
    plain = client.chat(model="eyes-ollama-vl", messages=[{"role": "user", "content": "Hi"}], options=GREEDY)
    seen = client.chat(model="eyes-ollama-vl", messages=turn(png(32, 32, seed=5), "Hi"), options=GREEDY)
    assert seen.done and seen.eval_count
    assert seen.prompt_eval_count is not None and plain.prompt_eval_count is not None
    assert seen.prompt_eval_count >= plain.prompt_eval_count + IMAGE_TOKENS


def test_a_webp_image_is_seen_as_the_same_pixels_in_png(server: str) -> None:
    """WebP (which Ollama takes, stb_image does not read) is decoded by Pillow: a lossless WebP of a
    PNG's pixels answers as the PNG does, through the openai client; a truncated one is a 400."""
    import io

    from PIL import Image

    picture = png(32, 32, seed=9)
    out = io.BytesIO()
    Image.open(io.BytesIO(picture)).save(out, format="WEBP", lossless=True)
    webp = out.getvalue()
    assert webp[:4] == b"RIFF" and webp[8:12] == b"WEBP"
    client = ollama.Client(server)
    as_png, as_webp = (client.chat(model="eyes", messages=turn(data), options=GREEDY) for data in (picture, webp))
    assert as_webp.message.content == as_png.message.content
    assert as_webp.prompt_eval_count == as_png.prompt_eval_count
    oai = openai.OpenAI(base_url=f"{server}/v1", api_key="x")

    def prompt_tokens(url: str) -> int:
        content = [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        messages: Any = [{"role": "user", "content": content}]
        reply = oai.chat.completions.create(model="eyes", messages=messages, temperature=0, max_tokens=8, seed=1)
        assert reply.usage is not None
        return reply.usage.prompt_tokens

    assert prompt_tokens(f"data:image/webp;base64,{b64(webp)}") == prompt_tokens(
        f"data:image/png;base64,{b64(picture)}"
    )
    with pytest.raises(ollama.ResponseError) as bad:
        client.chat(model="eyes", messages=turn(webp[:40]), options=GREEDY)
    assert bad.value.status_code == 400
