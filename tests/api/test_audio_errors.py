"""Audio refused as Ollama refuses it, on every API that carries it, before any model loads:
to a model that does not hear, in bad base64, in an ``input_audio`` part of the wrong shape, and
in a transcription form that is none."""

from __future__ import annotations

import base64

import pytest
from conftest import MODEL
from starlette.testclient import TestClient

from cllm_ollama.testing.audio import wav

CLIP = base64.b64encode(wav(0.2)).decode()
NO_AUDIO = f"registry.ollama.ai/library/{MODEL}:latest does not support audio"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
BAD_BASE64 = "invalid input_audio base64 data: illegal base64 data at input byte"
NO_FILE = "file is required: http: no such file"


def audio_part(value: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": [{"type": "text", "text": "Hear this."}, {"type": "input_audio", **value}]}]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/chat", {"messages": [{"role": "user", "content": "hear", "images": [CLIP]}]}),
        ("/api/generate", {"prompt": "hear", "images": [CLIP]}),
    ],
)
def test_native_audio_to_a_model_that_does_not_hear(client: TestClient, path: str, body: dict) -> None:
    r = client.post(path, json={"model": MODEL, "stream": False, **body})
    assert (r.status_code, r.json()) == (400, {"error": NO_AUDIO})


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ({"input_audio": {"data": CLIP, "format": "wav"}}, NO_AUDIO),
        ({"input_audio": {"data": CLIP}}, NO_AUDIO),  # the format is not read: the bytes say it
        ({"input_audio": "a string"}, "invalid input_audio format"),
        ({}, "invalid input_audio format"),
        ({"input_audio": None}, "invalid input_audio format"),
        ({"input_audio": {"format": "wav"}}, "invalid input_audio format: missing data"),
        ({"input_audio": {"data": 7}}, "invalid input_audio format: missing data"),
        ({"input_audio": {"data": "not base64!"}}, f"{BAD_BASE64} 3"),
        ({"input_audio": {"data": "aGk"}}, f"{BAD_BASE64} 0"),
    ],
)
def test_openai_input_audio_errors(client: TestClient, part: dict, message: str) -> None:
    r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": audio_part(part)})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == message


def test_a_transcription_for_a_model_that_does_not_hear(client: TestClient) -> None:
    r = client.post(TRANSCRIPTIONS, data={"model": MODEL}, files={"file": ("a.wav", wav(0.2), "audio/wav")})
    assert r.status_code == 400 and r.json()["error"]["message"] == NO_AUDIO


def test_a_transcription_for_a_model_that_does_not_exist(client: TestClient) -> None:
    r = client.post(TRANSCRIPTIONS, data={"model": "nope"}, files={"file": ("a.wav", wav(0.2), "audio/wav")})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"json": {"model": MODEL}},
            "failed to parse multipart form: request Content-Type isn't multipart/form-data",
        ),
        (
            {"content": b"x", "headers": {"content-type": "multipart/form-data"}},
            "failed to parse multipart form: no multipart boundary param in Content-Type",
        ),
        ({"files": {"file": ("a.wav", b"RIFF", "audio/wav")}}, "model is required"),
        ({"data": {"model": MODEL}, "files": {"other": ("a.wav", b"RIFF", "audio/wav")}}, NO_FILE),
        ({"data": {"model": MODEL}, "files": {"file": (None, "a value")}}, NO_FILE),
        ({"data": {"model": MODEL}, "files": {"file": ("a.wav", b"", "audio/wav")}}, "audio file is empty"),
    ],
)
def test_transcription_form_errors(client: TestClient, kwargs: dict, message: str) -> None:
    r = client.post(TRANSCRIPTIONS, **kwargs)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == {"message": message, "type": "invalid_request_error", "param": None, "code": None}
