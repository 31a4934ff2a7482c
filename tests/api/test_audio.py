"""Audio end to end, through the official ``ollama`` and ``openai`` clients, on the tiny model that
hears (a qwen3 with a ``qwen2a`` projector: Qwen2-Audio's and Qwen2.5-Omni's Whisper encoder).

A real server, a real llama.cpp with libmtmd: a clip accepted in Ollama's ``images``, in OpenAI's
``input_audio`` and by ``/v1/audio/transcriptions``; its tokens counted; a re-sent clip reused
from the KV cache; greedy output the same batched or alone, reused or cold.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import ollama
import openai
import pytest
from serving import serve_in_thread

from cllm_ollama.api.openai.transcriptions import GO_SPACE, transcription_messages
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.testing.audio import mp3, wav
from cllm_ollama.testing.audio_ggufs import AUDIO_TOKENS, write_audio, write_ultravox_projector
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ollama_vision_ggufs import write_ollama_gemma4

pytestmark = pytest.mark.model

MODEL = "ears"
GREEDY = {"temperature": 0, "num_predict": 8, "seed": 1}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def create(url: str, name: str, paths: tuple[Path, ...]) -> None:
    """``name`` created from GGUF files uploaded as blobs, its answers kept short (a transcription
    sets no limit of its own)."""
    files = {}
    for path in paths:
        data = path.read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code in (200, 201)  # 200: had it
        files[path.name] = digest
    body = {"model": name, "files": files, "parameters": {"num_predict": 8}, "stream": False}
    r = httpx.post(f"{url}/api/create", json=body, timeout=60)
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose store has "ears" (the tiny text model and its qwen2a projector, created from
    the two files as a user would), "ears-ultravox" (an Ultravox projector stacking 4 frames) and
    "ears-aborting" (one stacking Ultravox's own 8, on which libmtmd aborts), and "gemma4" (Gemma 4
    in Ollama's one-file layout, both towers inside)."""
    root = tmp_path_factory.mktemp("audio-server")
    # No disk cache: a clip's prompt is long enough to be saved there, and an unload must run cold.
    settings = Settings(models_dir=root / "models", num_parallel=4, context_length=2048, cache_disk_mib=0)
    with serve_in_thread(create_app(settings)) as url:
        text, mmproj = write_audio(root / "ears")
        create(url, MODEL, (text, mmproj))
        for name, stack in (("ears-ultravox", 4), ("ears-aborting", 8)):
            folder = root / name
            folder.mkdir()
            create(url, name, (text, write_ultravox_projector(folder / "mmproj.gguf", stack_factor=stack)))
        # A Gemma 4 in Ollama's one-file layout: its audio tower split into a projector at create.
        create(url, "gemma4", (write_ollama_gemma4(root / "model.gguf"),))
        yield url


def unload(url: str) -> None:
    """Drop the model and every KV it holds: the next request runs cold."""
    ollama.Client(url).generate(model=MODEL, prompt="", keep_alive=0)


def turn(clip: bytes, question: str = "What is said here?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": question, "images": [clip]}]


def openai_turn(clip: bytes, text: str = "Listen to this.") -> list[dict[str, Any]]:
    audio = {"type": "input_audio", "input_audio": {"data": b64(clip), "format": "wav"}}
    return [{"role": "user", "content": [{"type": "text", "text": text}, audio]}]


def test_the_model_shows_it_hears(server: str) -> None:
    show = ollama.Client(server).show(MODEL)
    # Any projector makes a model "vision" in Ollama's list; one with an audio encoder also "audio".
    assert {"completion", "vision", "audio"} <= set(show.capabilities or [])
    info = httpx.post(f"{server}/api/show", json={"model": MODEL}).json()["projector_info"]
    assert info["clip.has_audio_encoder"] is True and info["clip.projector_type"] == "qwen2a"


def test_a_clip_is_heard_and_its_tokens_counted_on_generate_and_chat(server: str) -> None:
    client = ollama.Client(server)
    clip = wav(1.0, seed=1)
    plain = client.generate(model=MODEL, prompt="Transcribe it.", options=GREEDY)
    heard = client.generate(model=MODEL, prompt="Transcribe it.", images=[clip], options=GREEDY)
    assert heard.done and heard.eval_count
    # The clip's tokens count as prompt tokens (plus libmtmd's begin/end-of-audio text).
    assert heard.prompt_eval_count is not None and plain.prompt_eval_count is not None
    assert heard.prompt_eval_count >= plain.prompt_eval_count + AUDIO_TOKENS
    assert heard.context and min(heard.context) >= 0  # token ids only: a next request may send it back
    chat = client.chat(model=MODEL, messages=turn(clip), options=GREEDY)
    assert chat.message.role == "assistant" and (chat.prompt_eval_count or 0) > AUDIO_TOKENS
    other = client.generate(model=MODEL, prompt="Transcribe it.", images=[wav(1.0, seed=2)], options=GREEDY)
    assert other.prompt_eval_count == heard.prompt_eval_count  # as long a window, another sound


def test_a_resent_clip_is_reused_and_answers_as_a_cold_run(server: str) -> None:
    """Turn 2 re-sends turn 1's clip in OpenAI's ``input_audio``: its KV is reused (cached tokens),
    and greedy output equals a cold run of the same request on a freshly loaded model."""
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    first = openai_turn(wav(1.0, seed=3))
    unload(server)
    one = client.chat.completions.create(model=MODEL, messages=first, temperature=0, max_tokens=8, seed=1)  # type: ignore[arg-type]
    follow = [*first, {"role": "assistant", "content": one.choices[0].message.content}]
    follow.append({"role": "user", "content": "And who said it?"})
    warm = client.chat.completions.create(model=MODEL, messages=follow, temperature=0, max_tokens=8, seed=1)  # type: ignore[arg-type]
    assert warm.usage is not None and warm.usage.prompt_tokens_details is not None
    assert (warm.usage.prompt_tokens_details.cached_tokens or 0) > AUDIO_TOKENS  # not computed again
    unload(server)
    cold = client.chat.completions.create(model=MODEL, messages=follow, temperature=0, max_tokens=8, seed=1)  # type: ignore[arg-type]
    assert cold.usage is not None and (cold.usage.prompt_tokens_details.cached_tokens or 0) == 0  # type: ignore[union-attr]
    assert warm.choices[0].message.content == cold.choices[0].message.content
    assert warm.usage.prompt_tokens == cold.usage.prompt_tokens


def test_audio_requests_batched_answer_as_each_alone(server: str) -> None:
    client = ollama.Client(server)
    clips = [wav(20.0, seed=10 + i) for i in range(4)]  # 20 s of a 30 s window: enough to tell apart

    def ask(clip: bytes) -> str:
        return client.chat(model=MODEL, messages=turn(clip), options=GREEDY).message.content or ""

    alone = []
    for clip in clips:
        unload(server)  # nothing reused: each computed on its own
        alone.append(ask(clip))
    unload(server)
    with ThreadPoolExecutor(len(clips)) as pool:
        together = list(pool.map(ask, clips))
    assert together == alone
    assert len(set(alone)) > 1  # the sounds make a difference to the answer


def test_a_transcription_is_the_chat_ollama_makes_of_it(server: str) -> None:
    """``client.audio.transcriptions.create`` answers what /api/chat answers to Ollama's
    transcription prompt at temperature 0, trimmed; ``response_format=text`` as plain text."""
    clip = wav(1.0, seed=20)
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    transcript = client.audio.transcriptions.create(model=MODEL, file=("clip.wav", clip, "audio/wav"))
    messages = transcription_messages(clip, "", "")
    chat = ollama.Client(server).chat(model=MODEL, messages=messages, options={"temperature": 0})
    assert transcript.text == (chat.message.content or "").strip(GO_SPACE) != ""
    text = client.audio.transcriptions.create(
        model=MODEL, file=("clip.wav", clip, "audio/wav"), response_format="text", language="en", prompt="A test."
    )
    with_context = transcription_messages(clip, "en", "A test.")
    assert with_context[0]["content"].endswith(" The audio is in en. Context: A test.")  # type: ignore[union-attr]
    chat = ollama.Client(server).chat(model=MODEL, messages=with_context, options={"temperature": 0})
    assert text == (chat.message.content or "").strip(GO_SPACE)


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (wav(1.0)[:40], "no audio: a WAV cut before its data"),
        (png(8, 8), "an image, to a projector that only hears"),
    ],
)
def test_bytes_the_projector_cannot_read_are_refused(server: str, data: bytes, detail: str) -> None:
    with pytest.raises(ollama.ResponseError) as caught:
        ollama.Client(server).chat(model=MODEL, messages=turn(data), options=GREEDY)
    assert caught.value.status_code == 400 and caught.value.error == "Failed to load image or audio file", detail
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    with pytest.raises(openai.BadRequestError, match="Failed to load image or audio file"):
        client.audio.transcriptions.create(model=MODEL, file=("clip.wav", data, "audio/wav"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (mp3(26_000), "audio 0 lasts 1872 seconds: more than 1800 (CLLM_MAX_AUDIO_SECONDS)"),  # 8 kbit/s frames
        (mp3(1, xing=10**9), "audio 0 lasts 72000000 seconds: more than 1800"),  # a Xing header claiming years
    ],
)
def test_audio_past_the_length_limit_is_refused_naming_it(server: str, data: bytes, message: str) -> None:
    """Before it is decoded, by its headers' length, in each dialect's shape."""
    with pytest.raises(ollama.ResponseError) as caught:
        ollama.Client(server).chat(model=MODEL, messages=turn(data), options=GREEDY)
    assert caught.value.status_code == 400 and caught.value.error.startswith(message)
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="x")
    with pytest.raises(openai.BadRequestError, match=re.escape(message)):
        client.audio.transcriptions.create(model=MODEL, file=("clip.wav", data, "audio/wav"))


def test_an_ultravox_hears(server: str) -> None:
    client = ollama.Client(server)
    plain = client.generate(model="ears-ultravox", prompt="Transcribe it.", options=GREEDY)
    heard = client.generate(model="ears-ultravox", prompt="Transcribe it.", images=[wav(1.0)], options=GREEDY)
    # 1500 encoder positions stacked by 4: 375 tokens, and no begin/end-of-audio text for Ultravox.
    assert heard.prompt_eval_count == (plain.prompt_eval_count or 0) + AUDIO_TOKENS // 2


def test_a_model_whose_audio_aborts_llama_cpp_refuses_audio_and_the_server_lives(server: str) -> None:
    """libmtmd aborts the process on every window of Ultravox's own stacking (8): the load's probe
    saw its child die there, so audio is refused with why, and everything else still runs."""
    client = ollama.Client(server)
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="ears-aborting", messages=turn(wav(1.0)), options=GREEDY)
    assert caught.value.status_code == 500
    assert "cannot encode this model's audio" in caught.value.error
    assert "Invalid number of output tokens" in caught.value.error
    assert client.chat(model="ears-aborting", messages=[{"role": "user", "content": "Hi"}], options=GREEDY).done
    assert client.chat(model=MODEL, messages=turn(wav(1.0)), options=GREEDY).done


def test_a_gemma4_in_ollamas_layout_hears(server: str) -> None:
    """Its audio tower, split out at create, is heard: ``audio`` listed, a 2 s clip's 50 tokens counted."""
    client = ollama.Client(server)
    assert {"vision", "audio"} <= set(client.show("gemma4").capabilities or [])
    plain = client.generate(model="gemma4", prompt="Transcribe it.", options=GREEDY)
    heard = client.generate(model="gemma4", prompt="Transcribe it.", images=[wav(2.0)], options=GREEDY)
    assert (heard.prompt_eval_count or 0) >= (plain.prompt_eval_count or 0) + 50
