"""Files named in a `cllm run` prompt, found and read as `ollama run` finds and reads them (Ollama's
own cases from cmd/interactive_test.go), and kept in the session's history; no server, no model."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cllm_ollama.cli import attachments
from cllm_ollama.cli.attachments import FileError, attach, file_names, supports_media
from cllm_ollama.cli.chat import Repl, Session
from cllm_ollama.cli.main import cli

from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.images import png

UNIX = r""" some preamble
 ./relative\ path/one.png inbetween1 ./not a valid two.jpg inbetween2 ./1.svg
/unescaped space /three.jpeg inbetween3 /valid\ path/dir/four.png "./quoted with spaces/five.JPG
/unescaped space /six.webp inbetween6 /valid\ path/dir/seven.WEBP"""
WINDOWS = r""" some preamble
 c:/users/jdoe/one.png inbetween1 c:/program files/someplace/two.jpg inbetween2
 /absolute/nospace/three.jpeg inbetween3 /absolute/with space/four.png inbetween4
./relative\ path/five.JPG inbetween5 "./relative with/spaces/six.png inbetween6
d:\path with\spaces\seven.JPEG inbetween7 c:\users\jdoe\eight.png inbetween8
 d:\program files\someplace\nine.png inbetween9 "E:\program files\someplace\ten.PNG
c:/users/jdoe/eleven.webp inbetween11 c:/program files/someplace/twelve.WebP inbetween12
d:\path with\spaces\thirteen.WEBP some ending
"""


def test_paths_are_found_as_ollama_finds_them() -> None:
    found = file_names(UNIX)
    ends = ["one.png", "two.jpg", "three.jpeg", "four.png", "five.JPG", "six.webp", "seven.WEBP"]
    assert len(found) == len(ends) and all(name.endswith(end) for name, end in zip(found, ends, strict=True))
    assert found[0] == r"./relative\ path/one.png" and '"' not in found[4]
    assert not any("1.svg" in name or "inbetween" in name for name in found)
    found = file_names(WINDOWS)
    assert len(found) == 13 and found[0].startswith("c:/") and found[9].startswith("E:\\")
    assert found[9].endswith("ten.PNG") and not any("inbetween2" in name for name in found)
    # `~` is not expanded: the path is found from its first `/` (as Ollama's pattern finds it).
    assert file_names("look at ~/photo.png now") == ["/photo.png"]
    assert file_names("/a.png./b.wav") == ["/a.png", "./b.wav"]


def test_files_are_read_escapes_undone_and_paths_taken_out(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "my pics (2)"
    folder.mkdir()
    (folder / "cat.png").write_bytes(png(8, 8))
    (tmp_path / "clip.wav").write_bytes(wav(0.1))
    escaped = str(folder).replace(" ", "\\ ").replace("(", "\\(").replace(")", "\\)") + "/cat.png"
    text = f"Compare {escaped} with '{tmp_path}/clip.wav' and {tmp_path}/missing.png please"
    cleaned, files = attach(text)
    assert cleaned == f"Compare  with  and {tmp_path}/missing.png please"  # a missing file stays text
    assert [base64.b64decode(f) for f in files] == [png(8, 8), wav(0.1)]
    assert capsys.readouterr().err.splitlines() == [
        f"Added image '{folder}/cat.png'",
        f"Added audio '{tmp_path}/clip.wav'",
    ]
    # A path wrapped in double quotes goes with its quotes (Ollama's newer filedata does so too).
    assert attach(f'"{folder}/cat.png" what is it?') == ("what is it?", [files[0]])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"just some notes\n", "invalid file type: text/plain; charset=utf-8"),
        (b"GIF89a" + bytes(20), "invalid file type: image/gif"),
        (bytes(range(32)), "invalid file type: application/octet-stream"),
        (b"", "EOF"),
    ],
)
def test_a_file_that_is_not_an_image_or_wav_fails_the_turn(
    tmp_path: Path, capsys: Any, data: bytes, message: str
) -> None:
    (tmp_path / "x.png").write_bytes(data)
    with pytest.raises(FileError, match=message):
        attach(f"see {tmp_path}/x.png")
    assert capsys.readouterr().err == f'Couldn\'t process file: "{message}"\n'


def test_a_directory_named_like_an_image_fails_the_turn(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "album.png").mkdir()
    with pytest.raises(FileError):
        attach(f"{tmp_path}/album.png")
    assert capsys.readouterr().err == f'Couldn\'t process file: "read {tmp_path}/album.png: is a directory"\n'


def test_a_file_over_100_mb_fails_the_turn(tmp_path: Path, capsys: Any) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(png(4, 4))
    os.truncate(big, attachments.MAX_FILE_BYTES + 1)  # sparse: nothing written past the PNG
    with pytest.raises(FileError, match=r"file size exceeds maximum limit \(100MB\)"):
        attach(f"{big}")
    os.truncate(big, attachments.MAX_FILE_BYTES)
    assert len(attach(f"{big}")[1]) == 1  # 100 MB itself is allowed


def test_who_gets_files() -> None:
    assert supports_media({"capabilities": ["completion", "vision"]})
    assert supports_media({"capabilities": ["completion", "audio"]})
    assert supports_media({"capabilities": ["completion"], "projector_info": {"clip.has_vision_encoder": True}})
    assert supports_media({"capabilities": [], "model_info": {"gemma3.vision.block_count": 2}})
    assert not supports_media({"capabilities": ["completion", "tools"], "model_info": {"qwen3.block_count": 2}})


class Recorder:
    """A backend that answers every chat with "ok" and keeps the bodies it was sent; /api/show
    gives each model's capabilities."""

    def __init__(self, **capabilities: list[str]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.capabilities = capabilities

    def stream(self, path: str, body: dict[str, Any], report: Any) -> None:
        self.bodies.append({"path": path, **body, "messages": [dict(m) for m in body["messages"]]})
        report({"message": {"role": "assistant", "content": "ok"}, "done": True})

    def show(self, name: str, verbose: bool = False) -> dict[str, Any]:
        return {"capabilities": self.capabilities[name]}


def test_a_session_keeps_images_in_its_history_and_goes_on_after_a_bad_file(tmp_path: Path, capsys: Any) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(png(8, 8))
    (tmp_path / "notes.png").write_text("not a picture")
    backend = Recorder(eyes=["completion", "vision"], plain=["completion"])
    repl = Repl(backend, Session("eyes", multimodal=True))  # type: ignore[arg-type]
    lines = [
        f"{photo} what is this?",  # a line that begins with a path is a prompt, not a command
        f"and {tmp_path}/notes.png?",  # not sent: said, and the session goes on
        '"""Once more,',
        f"{photo}",
        'please"""',
        "/?",
        "/load plain",
        f"{photo} now?",
    ]
    for line in lines:
        repl.handle(line)
    image = base64.b64encode(png(8, 8)).decode()
    first, second = backend.bodies[0]["messages"], backend.bodies[1]["messages"]
    assert first == [{"role": "user", "content": "what is this?", "images": [image]}]
    # The next turn sends the history with its image, and the multi-line prompt's own.
    assert second[0] == first[0] and second[1] == {"role": "assistant", "content": "ok"}
    assert second[2] == {"role": "user", "content": "Once more,\n\nplease", "images": [image]}
    assert len(backend.bodies) == 3  # /load's empty chat; then the text model does not get the third line
    out = capsys.readouterr()
    assert out.err.splitlines() == [
        f"Added image '{photo}'",
        'Couldn\'t process file: "invalid file type: text/plain; charset=utf-8"',
        f"Added image '{photo}'",
    ]
    assert attachments.USAGE_FILES in out.out
    assert f"Unknown command '{photo}'. Type /? for help" in out.out  # the model loaded cannot see


def test_one_shot_attaches_files_and_a_bad_one_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    backend = Recorder(ears=["completion", "audio"])
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: backend)
    monkeypatch.chdir(tmp_path)
    Path("clip.wav").write_bytes(wav(0.1))
    Path("notes.wav").write_text("words")
    result = CliRunner().invoke(cli, ["run", "ears", "What", "is", "./clip.wav?"])
    assert result.exit_code == 0, result.output
    (body,) = backend.bodies
    assert body["messages"] == [
        {"role": "user", "content": "What is ?", "images": [base64.b64encode(wav(0.1)).decode()]}
    ]
    assert result.stderr == "Added audio './clip.wav'\n"
    result = CliRunner().invoke(cli, ["run", "ears", "What is ./notes.wav"])
    assert result.exit_code == 1 and len(backend.bodies) == 1
    assert result.stderr.splitlines() == [
        'Couldn\'t process file: "invalid file type: text/plain; charset=utf-8"',
        "Error: invalid file type: text/plain; charset=utf-8",
    ]
