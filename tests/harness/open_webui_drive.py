"""Drive Open WebUI's chat page in Chromium, one command a line (run under Open WebUI's venv,
whose ``playwright`` launches Debian's Chromium: see harness/open_webui.py).

Usage: ``python open_webui_drive.py URL CHROMIUM`` then, on stdin, JSON lines:
- ``{"send": TEXT, "image": PATH or null}``: attach the picture through the chat input's file
  input (as the "+" menu's upload does), type TEXT, press Enter, and wait until the answer is
  done (its copy button appears, as Open WebUI's own Cypress tests wait for its edit button);
- ``{"screenshot": PATH}``;
- ``{"quit": true}``.
Each command gets one JSON line back: ``{"ok": true, "answers": N, "text": LAST ANSWER}`` or
``{"ok": false, "error": ..., "page": VISIBLE TEXT}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ANSWER_S = 180  # one answer, on a busy two-core machine
DONE = ".copy-response-button"  # an answer's, rendered once ``message.done``
EDITOR = "#chat-input"  # the message editor (attachments show above it once uploaded)
WELCOME_S = 30  # how long a new page waits for the "what's new" dialog


def dismiss_welcome(page: Page, wait_s: float) -> None:
    """Close the "what's new" dialog a new user first gets over the page, as a user does, if it
    shows within ``wait_s`` seconds (it follows the page's models and changelog requests)."""
    welcome = page.get_by_role("button", name="Okay, Let's Go!")
    try:
        welcome.wait_for(state="visible", timeout=wait_s * 1000)
    except PlaywrightTimeout:
        return  # not shown to this user (seen already), or not yet
    welcome.click()
    welcome.wait_for(state="hidden")


def send(page: Page, text: str, image: str | None) -> dict[str, Any]:
    dismiss_welcome(page, 0.1)  # shown late, on a slow machine
    before = page.locator(DONE).count()
    if image:
        # The chat input's own (hidden) file input: the first multiple-file input in the form.
        page.locator("form input[type=file]").first.set_input_files(image)
        # Uploaded: the image's thumbnail is shown in the input, and sending is enabled.
        page.locator("form img").first.wait_for(state="visible", timeout=ANSWER_S * 1000)
    editor = page.locator(EDITOR)
    editor.click()
    editor.fill(text)
    button = page.locator("#send-message-button")
    button.wait_for(state="visible")
    page.wait_for_function("() => !document.querySelector('#send-message-button')?.disabled", timeout=60_000)
    button.click()
    page.wait_for_function(
        f"n => document.querySelectorAll({json.dumps(DONE)}).length > n", arg=before, timeout=ANSWER_S * 1000
    )
    answers = page.locator(".chat-assistant")
    return {"ok": True, "answers": answers.count(), "text": answers.last.inner_text()}


def main() -> None:
    url, chromium = sys.argv[1], sys.argv[2]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.locator(EDITOR).wait_for(state="visible", timeout=ANSWER_S * 1000)
        dismiss_welcome(page, WELCOME_S)
        print(json.dumps({"ok": True, "ready": page.url}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            try:
                if "send" in command:
                    reply = send(page, command["send"], command.get("image"))
                elif "screenshot" in command:
                    page.screenshot(path=command["screenshot"], full_page=True)
                    reply = {"ok": True}
                else:
                    break
            except Exception as exc:  # said back to the test, with what the page shows
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "page": page.inner_text("body")[-3000:]}
            print(json.dumps(reply), flush=True)
        browser.close()


if __name__ == "__main__":
    main()
