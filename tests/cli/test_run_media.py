"""`cllm run` sees and hears the files a prompt names, against the real server and the tiny models
that see (a gemma3 with its projector) and hear (a qwen3 with a qwen2a projector): the file's tokens
are counted as the same request through the API counts them, the answer is the API's, and a model
that cannot see gets the path as text."""

from __future__ import annotations

import base64
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from cllm_ollama.cli.main import cli
from serving import create_from_files, serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.audio_ggufs import write_audio
from cllm_ollama.testing.ggufs import write_qwen3, write_vision
from cllm_ollama.testing.images import png

pytestmark = pytest.mark.model
pexpect = pytest.importorskip("pexpect")
CLLM = str(Path(sys.executable).parent / "cllm")
IMAGE_TOKENS = 4  # the tiny projector: a 32 px image is 4 tokens


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server with "eyes" (sees), "ears" (hears) and "plain" (neither), each greedy and short; the
    env that points the CLI at it, and a folder holding photo.png and clip.wav."""
    root = tmp_path_factory.mktemp("run-media")
    settings = Settings(models_dir=root / "models", num_parallel=1, context_length=2048, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        sources = {
            "eyes": write_vision(root / "eyes"),
            "ears": write_audio(root / "ears"),
            "plain": (write_qwen3(root / "plain.gguf"),),
        }
        for name, files in sources.items():
            create_from_files(url, f"{name}-base", files)
            body = {"model": name, "from": f"{name}-base", "parameters": {"num_predict": 8, "temperature": 0}}
            assert httpx.post(f"{url}/api/create", json=body | {"stream": False}, timeout=60).status_code == 200
        files = root / "files"
        files.mkdir()
        (files / "photo.png").write_bytes(png(32, 32, seed=1))
        (files / "clip.wav").write_bytes(wav(1.0))
        env = {"OLLAMA_HOST": url, "OLLAMA_MODELS": str(root / "cli-models"), "HOME": str(root), "TERM": "dumb"}
        yield {"url": url, "env": env, "files": files}


def api_chat(url: str, model: str, content: str, media: Path | None = None) -> dict[str, Any]:
    """The answer to one user turn through /api/chat."""
    message: dict[str, Any] = {"role": "user", "content": content}
    if media is not None:
        message["images"] = [base64.b64encode(media.read_bytes()).decode()]
    body = {"model": model, "messages": [message], "stream": False, "think": False}
    response = httpx.post(f"{url}/api/chat", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def prompt_count(text: str) -> int:
    """The ``prompt eval count`` of ``--verbose``'s summary."""
    match = re.search(r"prompt eval count:\s+(\d+) token\(s\)", text)
    assert match, text[-2000:]
    return int(match.group(1))


def run(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    """``cllm run --verbose --think=false ARGS`` one-shot, in the folder holding the files."""
    monkeypatch.chdir(served["files"])
    return CliRunner().invoke(cli, ["run", *args[:1], "--verbose", "--think=false", *args[1:]], env=served["env"])


def test_one_shot_sends_the_image_a_prompt_names(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(served, monkeypatch, "eyes", "What is in ./photo.png?")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == "Added image './photo.png'"
    # The same request through the API: the path taken out of the text, the image sent.
    api = api_chat(served["url"], "eyes", "What is in ?", served["files"] / "photo.png")
    assert prompt_count(result.stderr) == api["prompt_eval_count"]
    assert result.stdout == api["message"]["content"] + "\n\n"
    plain = api_chat(served["url"], "eyes", "What is in ?")
    assert api["prompt_eval_count"] >= plain["prompt_eval_count"] + IMAGE_TOKENS


def test_one_shot_sends_the_wav_a_prompt_names(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(served, monkeypatch, "ears", "Listen:", "./clip.wav")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == "Added audio './clip.wav'"
    api = api_chat(served["url"], "ears", "Listen:", served["files"] / "clip.wav")
    assert prompt_count(result.stderr) == api["prompt_eval_count"]
    assert api["prompt_eval_count"] > api_chat(served["url"], "ears", "Listen:")["prompt_eval_count"] + 100


def test_a_model_that_cannot_see_gets_the_path_as_text(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    photo = str(served["files"] / "photo.png")
    result = run(served, monkeypatch, "plain", f"What is in {photo}?")
    assert result.exit_code == 0, result.output
    assert "Added" not in result.stderr
    assert prompt_count(result.stderr) == api_chat(served["url"], "plain", f"What is in {photo}?")["prompt_eval_count"]
    # A missing file stays text for a model that sees, too; a file that is no image is an error.
    missing = run(served, monkeypatch, "eyes", "What is in ./nothing.png?")
    assert missing.exit_code == 0 and "Added" not in missing.stderr
    assert (
        prompt_count(missing.stderr)
        == api_chat(served["url"], "eyes", "What is in ./nothing.png?")["prompt_eval_count"]
    )
    (served["files"] / "notes.jpg").write_text("words")
    bad = run(served, monkeypatch, "eyes", "What is in ./notes.jpg?")
    assert bad.exit_code == 1 and bad.stderr.splitlines()[-1] == "Error: invalid file type: text/plain; charset=utf-8"


def test_a_session_turn_names_an_image(served: dict[str, Any]) -> None:
    photo = served["files"] / "photo.png"
    child = pexpect.spawn(
        CLLM, ["run", "eyes", "--verbose", "--think=false"], env={**os.environ, **served["env"]}, encoding="utf-8"
    )
    child.timeout = 120
    child.setwinsize(40, 200)
    child.expect_exact(">>> ")
    child.sendline("/?")
    child.expect_exact("Use /path/to/file to include .jpg, .png, .webp images, or .wav audio files.")
    child.sendline(f"{photo} What is it?")  # a line that begins with a path
    child.expect_exact(f"Added image '{photo}'")
    child.expect(r"prompt eval count:\s+(\d+) token\(s\)")
    seen = int(child.match.group(1))
    assert seen == api_chat(served["url"], "eyes", "What is it?", photo)["prompt_eval_count"]
    # A clip for a model that only sees: the server refuses the turn; the session goes on.
    child.sendline(f"{served['files'] / 'clip.wav'} Listen.")
    child.expect_exact("error: registry.ollama.ai/library/eyes:latest does not support audio")
    child.expect_exact(">>> ")
    child.sendline("/load plain")
    child.expect_exact("Loading model 'plain'")
    child.expect_exact(">>> ")
    child.sendline(f"{photo} What is it?")
    child.expect_exact(f"Unknown command '{photo}'. Type /? for help")
    child.sendline("/bye")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
