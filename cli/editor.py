"""Ctrl+G in ``cllm run``: the line typed so far, composed further in an editor, as ``ollama run``
does (its ``editInExternalEditor``): ``OLLAMA_EDITOR``, else ``$VISUAL``, ``$EDITOR``, ``vi``.

Python's ``readline`` cannot bind a key to Python code, so Ctrl+G is bound to a readline macro
that puts ``EDIT_MARK`` before the line and accepts it: the session reads the marked line as the
request to edit, and the editor's text is put back on the next prompt for the user to send.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType

# Put before the line by Ctrl+G's macro (plain text: a macro's backslashes are escapes); typed by
# hand it only opens the editor.
EDIT_MARK = "/~compose~ "
_DEFAULT_EDITOR = "vi"


class EditorError(Exception):
    """The editor could not be found or run; said to the user, the session goes on."""


def _readline() -> ModuleType | None:
    """GNU readline, the one whose macros Ctrl+G's binding is written in (not macOS's libedit)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows has none
        return None
    return None if "libedit" in (readline.__doc__ or "") else readline


def bind_compose_key() -> None:
    """Ctrl+G: to the beginning of the line, ``EDIT_MARK``, accept (``Repl`` opens the editor)."""
    readline = _readline()
    if readline is not None:
        readline.parse_and_bind(f'"\\C-g": "\\C-a{EDIT_MARK}\\C-j"')


def forget_marked_line() -> None:
    """The marked line leaves the history, where readline put it once accepted."""
    readline = _readline()
    if readline is not None and (n := readline.get_current_history_length()) > 0:
        item = readline.get_history_item(n)
        if item is not None and item.startswith(EDIT_MARK):
            readline.remove_history_item(n - 1)


def prefill_next(text: str) -> None:
    """``text`` on the next prompt, editable, as ollama's readline ``Prefill``; once."""
    readline = _readline()
    if readline is None:
        return

    def hook() -> None:
        readline.insert_text(text)
        readline.set_startup_hook(None)

    readline.set_startup_hook(hook)


def compose(text: str, editor: str = "") -> str:
    """``text`` edited in ``editor`` (or ``$VISUAL``, ``$EDITOR``, ``vi``): what the file holds
    when the editor exits, without its trailing newlines."""
    command = shlex.split(editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or _DEFAULT_EDITOR)
    if not command or shutil.which(command[0]) is None:
        name = command[0] if command else ""
        raise EditorError(f'editor "{name}" not found, set OLLAMA_EDITOR to the path of your preferred editor')
    fd, name = tempfile.mkstemp(prefix="cllm-prompt-", suffix=".txt")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            subprocess.run([*command, str(path)], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise EditorError(f"editor exited with error: {exc}") from exc
        return path.read_text(encoding="utf-8", errors="replace").rstrip("\n")
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
