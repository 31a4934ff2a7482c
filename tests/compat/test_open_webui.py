"""Open WebUI 0.12.4 in Chromium against a fresh ``cllm serve`` and the tiny vision model at the
default context (issue 35's proof): a picture message, a follow-up, an unload, and a picture
message again, each sent through Open WebUI's chat page, must each answer 200.

Open WebUI sets no ``num_ctx`` and sends its tool definitions with every chat: the first picture
message is longer than the 4,096-token default context, which cllm grows for it (before issue 35,
only for text: a picture got 400). After the unload the model loads at 4,096 again and the next
picture message must grow it again; its conversation's start comes back from disk, where the
tiny gemma3's sliding-window checkpoints were saved with it, so no prompt is computed whole again.

Skipped unless Open WebUI (in its own venv) and Chromium are installed: ``bash compat/open_webui.sh``
installs both and runs this. Open WebUI's background tasks (titles, tags, follow-up suggestions)
are switched off, so that every chat request cllm sees is one the page sent and the unload falls
between them, not during one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.child_server import cllm_serve
from harness.open_webui import DRIVER, VENV, ChatLog, chromium, missing, open_webui_serve
from serving import create_from_files, serve_in_thread

from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import png

REASON = missing()
pytestmark = [pytest.mark.openwebui, pytest.mark.model, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
MODEL = "eyes"
# Where the page's screenshot is kept after the run (default: the test's temporary folder).
SCREENSHOT_ENV = "CLLM_OPEN_WEBUI_SCREENSHOT"
BACKGROUND_TASKS_OFF = {
    "ENABLE_TITLE_GENERATION": "False",
    "ENABLE_TAGS_GENERATION": "False",
    "ENABLE_FOLLOW_UP_GENERATION": "False",
    "ENABLE_AUTOCOMPLETE_GENERATION": "False",
}
ACCESS = re.compile(r'"(GET|POST) (/api/\w+) HTTP/1\.1" (\d+)')


@dataclass
class Rig:
    cllm: str
    cllm_log: Path
    chats: ChatLog
    driver: subprocess.Popen[str]

    def command(self, **command: Any) -> dict[str, Any]:
        assert self.driver.stdin is not None and self.driver.stdout is not None
        self.driver.stdin.write(json.dumps(command) + "\n")
        self.driver.stdin.flush()
        reply: dict[str, Any] = json.loads(self.driver.stdout.readline() or '{"ok": false, "error": "driver died"}')
        return reply

    def context(self) -> int:
        (model,) = httpx.get(f"{self.cllm}/api/ps").json()["models"]
        return int(model["context_length"])

    def access(self) -> list[tuple[str, str, int]]:
        """cllm's own access log: (method, path, status) of every request it answered."""
        text = self.cllm_log.read_text(errors="replace")
        return [(m, p, int(s)) for m, p, s in ACCESS.findall(text)]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("open-webui")
    cllm_log, owui_log = root / "cllm.log", root / "open-webui.log"
    with cllm_serve(root / "models", {}, cllm_log) as (_, url):
        # Its answers kept short: random weights ramble.
        create_from_files(url, MODEL, write_vision(root / "vision"), {"num_predict": 16})
        chats = ChatLog(url)
        with (
            serve_in_thread(chats) as proxy,
            open_webui_serve(proxy, root / "data", owui_log, MODEL, BACKGROUND_TASKS_OFF) as page_url,
        ):
            command = [str(VENV / "bin" / "python"), str(DRIVER), page_url, str(chromium())]
            driver = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                assert driver.stdout is not None
                ready = json.loads(driver.stdout.readline() or "{}")
                assert ready.get("ok"), owui_log.read_text(errors="replace")[-3000:]
                yield Rig(url, cllm_log, chats, driver)
            finally:
                assert driver.stdin is not None and driver.stdout is not None
                driver.stdin.close()
                driver.wait(timeout=60)
                driver.stdout.close()


def test_picture_chat_through_open_webui_grows_the_context_across_a_follow_up_and_an_unload(
    rig: Rig, tmp_path: Path
) -> None:
    pictures = [tmp_path / "red.png", tmp_path / "blue.png"]
    for seed, path in enumerate(pictures, 1):
        path.write_bytes(png(32, 32, seed=seed))
    shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "open-webui.png")

    first = rig.command(send="What is in this picture?", image=str(pictures[0]))
    assert first["ok"], first
    (chat,) = rig.chats.chats()
    assert chat.status == 200 and chat.done and not chat.error and chat.images == 1, str(chat)
    assert chat.tools > 0  # Open WebUI's own tool definitions (36 in 0.12.4)
    assert "options" not in chat.body or "num_ctx" not in chat.body["options"]  # the default context
    assert rig.context() > 4096  # grown for the picture message

    follow = rig.command(send="And its colours?", image=None)
    assert follow["ok"], follow
    chat = rig.chats.chats()[-1]
    assert chat.status == 200 and chat.done and not chat.error, str(chat)
    assert chat.images == 1 and len(chat.body["messages"]) >= 3, str(chat)

    # The unload Open WebUI's keep_alive expiry does: the model is gone, the next load is at 4,096.
    unload = httpx.post(f"{rig.cllm}/api/generate", json={"model": MODEL, "keep_alive": 0}, timeout=60)
    assert unload.status_code == 200
    assert httpx.get(f"{rig.cllm}/api/ps").json()["models"] == []

    again = rig.command(send="And this one?", image=str(pictures[1]))
    assert again["ok"], again
    chat = rig.chats.chats()[-1]
    assert chat.status == 200 and chat.done and not chat.error and chat.images == 2, str(chat)
    assert rig.context() > 4096

    assert rig.command(screenshot=str(shot))["ok"]
    # Every chat request the page sent, and only those: three, each answered whole.
    chats = rig.chats.chats()
    assert len(chats) == 3 and all(c.status == 200 and c.done and not c.error and c.text for c in chats)
    # cllm's own access log says the same, and the page shows every answer.
    assert [status for _, path, status in rig.access() if path == "/api/chat"] == [200, 200, 200]
    assert [first["answers"], follow["answers"], again["answers"]] == [1, 2, 3]
    # The message after the unload found the conversation's start on disk, with the checkpoints
    # of the model's sliding window (gemma3): not computed whole again.
    assert "could not be reused" not in rig.cllm_log.read_text(errors="replace")
