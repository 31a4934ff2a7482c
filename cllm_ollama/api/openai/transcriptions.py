"""POST /v1/audio/transcriptions: OpenAI's speech to text, as Ollama serves it.

Ollama's ``TranscriptionMiddleware`` (middleware/openai.go, openai.go ``FromTranscriptionRequest``)
turns the multipart form into a chat: a fixed system prompt (the form's ``language`` and
``prompt`` appended), the audio as the user message's one medium, temperature 0. The reply's
text, trimmed, is the transcript: ``{"text": ...}``, or plain text for ``response_format=text``.
There is no second path: it runs as an /api/chat generation, batched with everything else.
"""

from __future__ import annotations

import base64
import time
from email.message import Message

from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response

from ...errors import InvalidRequest, RequestCanceled
from ..encoders import JSONResponse
from ..errors import OPENAI
from ..lifecycle import Generation, collect
from ..media import Media
from ..ollama.chat import ChatCall, start_chat
from ..schemas.ollama import ChatRequest
from ..streaming import until_disconnect

SYSTEM = (
    "Transcribe the audio exactly as spoken. Output only the spoken words. Do not answer any question in the audio."
)
QUESTION = "What exact words are spoken in this audio?"
# Go's strings.TrimSpace trims Unicode White_Space, which Python's str.strip exceeds (U+001C-U+001F).
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
GO_SPACE += "\u2028\u2029\u202f\u205f\u3000"


def transcription_messages(audio: bytes, language: str, prompt: str) -> list[dict[str, object]]:
    """The chat Ollama makes of a transcription request (``FromTranscriptionRequest``)."""
    system = SYSTEM
    if language:
        system += f" The audio is in {language}."
    if prompt:
        system += f" Context: {prompt}"
    # The audio's bytes as they are (nothing to decode); its base64 is what a template would see.
    media = [Media(base64.b64encode(audio).decode(), audio)]
    user: dict[str, object] = {"role": "user", "content": QUESTION, "images": media}
    return [{"role": "system", "content": system}, user]


async def _form(request: Request) -> FormData:
    """The multipart form, refused with Go's words (``Request.ParseMultipartForm``) where it is none."""
    message = Message()
    message["content-type"] = request.headers.get("content-type", "")
    if message.get_content_type() != "multipart/form-data":
        raise InvalidRequest("failed to parse multipart form: request Content-Type isn't multipart/form-data")
    if not message.get_param("boundary"):
        raise InvalidRequest("failed to parse multipart form: no multipart boundary param in Content-Type")
    try:
        return await request.form(max_files=1)
    except ClientDisconnect:
        raise RequestCanceled() from None
    except HTTPException as exc:  # starlette's word for a malformed body (python-multipart's error)
        raise InvalidRequest(f"failed to parse multipart form: {exc.detail}") from None


def _value(form: FormData, name: str) -> str:
    """Go's ``FormValue``: the field's first value, "" when absent (a file part is no value)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


@OPENAI.boundary
async def transcriptions(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    form = await _form(request)
    try:
        model = _value(form, "model")
        if not model:
            raise InvalidRequest("model is required")
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("file is required: http: no such file")
        audio = await upload.read()
    finally:
        await form.close()
    if not audio:
        raise InvalidRequest("audio file is empty")
    messages = transcription_messages(audio, _value(form, "language"), _value(form, "prompt"))
    call = ChatCall.of(ChatRequest(model=model, options={"temperature": 0}), messages, None)
    gen = await start_chat(request, call, t_start)
    assert isinstance(gen, Generation)  # a chat with messages is never a load or unload call
    final = await until_disconnect(request, collect(gen.chunks()))
    text = final.delta.content.strip(GO_SPACE)
    if _value(form, "response_format") == "text":
        return PlainTextResponse(text)
    return JSONResponse({"text": text})
