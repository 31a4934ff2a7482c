"""`cllm run`: chat with a model through the running server, as `ollama run` does.

One answer for a prompt (or piped stdin), else an interactive session with Ollama's commands
(``/set``, ``/show``, ``/load``, ``/save``, ``/clear``, ``/list``, ``/?``, ``\"\"\"`` multi-line input).
For a model that sees or hears, image and WAV files named in a prompt go with it (``attachments``).
Ctrl+C stops an answer and keeps the session; at an empty prompt it says how to leave.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from cllm_ollama.errors import CllmError
from cllm_ollama.gostrconv import go_quote
from cllm_ollama.store.modelfile import parse_parameter

from .attachments import USAGE_FILES, FileError, attach, file_names, supports_media
from .backend import HttpBackend
from .editor import EDIT_MARK, EditorError, bind_compose_key, compose, forget_marked_line, prefill_next
from .render import echo_models, show_text

MULTILINE = '"""'

USAGE = """Available Commands:
  /set            Set session variables
  /show           Show model information
  /load <model>   Load a session or model
  /save <model>   Save your current session
  /clear          Clear session context
  /bye            Exit
  /?, /help       Help for a command
  /? shortcuts    Help for keyboard shortcuts

Use \"\"\" to begin a multi-line message.
"""
USAGE_SET = """Available Commands:
  /set parameter ...     Set a parameter
  /set system <string>   Set system message
  /set history           Enable history
  /set nohistory         Disable history
  /set wordwrap          Enable wordwrap
  /set nowordwrap        Disable wordwrap
  /set format json       Enable JSON mode
  /set noformat          Disable formatting
  /set verbose           Show LLM stats
  /set quiet             Disable LLM stats
  /set think             Enable thinking
  /set nothink           Disable thinking
"""
USAGE_SHOW = """Available Commands:
  /show info         Show details for this model
  /show license      Show model license
  /show modelfile    Show Modelfile for this model
  /show parameters   Show parameters for this model
  /show system       Show system message
  /show template     Show prompt template
"""
USAGE_PARAMETERS = """Available Parameters:
  /set parameter seed <int>             Random number seed
  /set parameter num_predict <int>      Max number of tokens to predict
  /set parameter top_k <int>            Pick from top k num of tokens
  /set parameter top_p <float>          Pick token based on sum of probabilities
  /set parameter min_p <float>          Pick token based on top token probability * min_p
  /set parameter num_ctx <int>          Set the context size
  /set parameter temperature <float>    Set creativity level
  /set parameter repeat_penalty <float> How strongly to penalize repetitions
  /set parameter repeat_last_n <int>    Set how far back to look for repetitions
  /set parameter num_gpu <int>          The number of layers to send to the GPU
  /set parameter stop <string> <string> ...   Set the stop parameters
"""
USAGE_SHORTCUTS = """Available keyboard shortcuts:
  Ctrl + a            Move to the beginning of the line (Home)
  Ctrl + e            Move to the end of the line (End)
   Alt + b            Move back (left) one word
   Alt + f            Move forward (right) one word
  Ctrl + k            Delete the sentence after the cursor
  Ctrl + u            Delete the sentence before the cursor
  Ctrl + w            Delete the word before the cursor

  Ctrl + l            Clear the screen
  Ctrl + g            Open default editor to compose a prompt
  Ctrl + c            Stop the model from responding
  Ctrl + d            Exit cllm (/bye)
"""
_THINK_LEVELS = ("high", "medium", "low", "max")
_HISTORY_LINES = 1000
THINK_VALUES = ("true", "false", "yes", "no", "on", "off", *_THINK_LEVELS)
_TURN_REFUSALS = (
    "does not support thinking",
    "invalid think value",
    "does not support audio",
    "does not support vision",
)


@dataclass
class Session:
    """What ``ollama run`` keeps between turns (its runOptions)."""

    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    format: str = ""
    think: bool | str | None = None
    hide_thinking: bool = False
    verbose: bool = False
    wordwrap: bool = True
    keep_alive: str | None = None
    multimodal: bool = False  # the model sees or hears: files named in a prompt are sent with it
    # The model's own MESSAGES (a session saved before): shown at the start, kept by /save.
    loaded_messages: list[dict[str, Any]] = field(default_factory=list)

    def user_message(self, text: str) -> dict[str, Any]:
        """The user's turn, with the files ``text`` names when the model takes them (``FileError``
        when one cannot be sent)."""
        message: dict[str, Any] = {"role": "user", "content": text}
        if self.multimodal:
            message["content"], images = attach(text)
            if images:
                message["images"] = images
        return message

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "stream": True}
        if self.options:
            body["options"] = self.options
        if self.format:
            body["format"] = format_value(self.format)
        if self.think is not None:
            body["think"] = self.think
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body


def format_value(text: str) -> Any:
    """``--format`` as Ollama's CLI sends it: ``json``, or the JSON it holds (a schema object)."""
    if text == "json":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # the server refuses it in its own words


def parse_think(value: str | None) -> bool | str | None:
    """``--think[=true|false|high|medium|low]`` as Ollama reads it."""
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("true", "yes", "on", ""):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in _THINK_LEVELS:
        return lowered
    raise CllmError(f"invalid value for --think: {go_quote(value)} (must be true, false, high, medium, low, or max)")


def go_duration(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``1.234s``, ``56.7ms``, ``890µs``, ``1m2.5s``."""
    if ns == 0:
        return "0s"
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return _trim(ns / 1_000, 3) + "µs"
    if ns < 1_000_000_000:
        return _trim(ns / 1_000_000, 6) + "ms"
    seconds = ns / 1e9
    hours, rest = divmod(int(seconds), 3600)
    minutes = rest // 60
    frac = _trim(seconds - hours * 3600 - minutes * 60, 9) + "s"
    if hours:
        return f"{hours}h{minutes}m{frac}"
    return f"{minutes}m{frac}" if minutes else frac


def _trim(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return text or "0"


def summary(final: dict[str, Any]) -> str:
    """Ollama's ``--verbose`` timing summary (``api.Metrics.Summary``)."""
    lines = []
    if final.get("total_duration"):
        lines.append(f"total duration:       {go_duration(final['total_duration'])}")
    if final.get("load_duration"):
        lines.append(f"load duration:        {go_duration(final['load_duration'])}")
    if final.get("prompt_eval_count"):
        lines.append(f"prompt eval count:    {final['prompt_eval_count']} token(s)")
    if final.get("prompt_eval_duration"):
        lines.append(f"prompt eval duration: {go_duration(final['prompt_eval_duration'])}")
        rate = final.get("prompt_eval_count", 0) / (final["prompt_eval_duration"] / 1e9)
        lines.append(f"prompt eval rate:     {rate:.2f} tokens/s")
    if final.get("eval_count"):
        lines.append(f"eval count:           {final['eval_count']} token(s)")
    if final.get("eval_duration"):
        lines.append(f"eval duration:        {go_duration(final['eval_duration'])}")
        lines.append(
            f"eval rate:            {final.get('eval_count', 0) / (final['eval_duration'] / 1e9):.2f} tokens/s"
        )
    return "\n".join(lines)


class WordWrap:
    """Text written as it streams, broken at spaces before it passes the terminal's width."""

    def __init__(self, write: Callable[[str], None], width: int) -> None:
        self.write, self.width = write, width
        self.column = 0
        self.word = ""

    def feed(self, text: str) -> None:
        for ch in text:
            if ch == "\n":
                self._flush()
                self.write("\n")
                self.column = 0
            elif ch == " ":
                self._flush()
                if self.column < self.width:
                    self.write(" ")
                    self.column += 1
            else:
                self.word += ch
                if len(self.word) >= self.width:  # a word longer than the line: break it
                    self._flush()

    def _flush(self) -> None:
        if not self.word:
            return
        if self.column and self.column + len(self.word) > self.width:
            self.write("\n")
            self.column = 0
        self.write(self.word)
        self.column += len(self.word)
        self.word = ""

    def close(self) -> None:
        self._flush()


def catch_ctrl_c() -> None:
    """Let Ctrl+C stop an answer even when this process started with SIGINT ignored (what a shell
    without job control gives a command run with ``&``, and its children inherit): Python then
    leaves it ignored, while Ollama's CLI takes it back (Go's ``signal.Notify`` does)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def reply(backend: HttpBackend, session: Session, *, wrap: bool = False) -> dict[str, Any] | None:
    """Print one streamed answer and return the assistant message (None if Ctrl+C stopped it).

    Thinking is shown as Ollama shows it (dimmed on a terminal) unless hidden.
    """
    content: list[str] = []
    thinking_text: list[str] = []
    calls: list[dict[str, Any]] = []
    state: dict[str, Any] = {"thinking": False, "final": {}}
    width = shutil.get_terminal_size((80, 24)).columns - 5
    out = WordWrap(lambda s: click.echo(s, nl=False), width) if wrap and width > 10 else None

    def say(text: str) -> None:
        if out is not None:
            out.feed(text)
        else:
            click.echo(text, nl=False)

    def show(chunk: dict[str, Any]) -> None:
        message = chunk.get("message") or {}
        if message.get("thinking"):
            thinking_text.append(message["thinking"])
            if not session.hide_thinking:
                if not state["thinking"]:
                    click.secho("Thinking...", dim=True)
                    state["thinking"] = True
                click.secho(message["thinking"], dim=True, nl=False)
        if message.get("content"):
            if state["thinking"]:
                click.secho("\n...done thinking.\n", dim=True)
                state["thinking"] = False
            say(message["content"])
            content.append(message["content"])
        calls.extend(message.get("tool_calls") or [])
        if chunk.get("done"):
            state["final"] = chunk

    try:
        backend.stream("/api/chat", session.body(), show)
    except KeyboardInterrupt:
        if out is not None:
            out.close()
        click.echo()
        return None
    if out is not None:
        out.close()
    click.echo("\n")  # a blank line after each answer, as Ollama's CLI leaves
    if session.verbose and state["final"]:
        click.echo(summary(state["final"]), err=True)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if thinking_text:
        message["thinking"] = "".join(thinking_text)
    if calls:
        message["tool_calls"] = calls
    return message


def _set_parameter(session: Session, name: str, values: list[str]) -> None:
    """``/set parameter NAME VALUE...``, typed as a Modelfile's PARAMETER (Ollama's ``FormatParams``):
    a name Ollama does not know, or a value of the wrong kind, is said and not set."""
    try:
        session.options[name] = values if name == "stop" else parse_parameter(name, values[0])
    except CllmError as exc:
        click.echo(f"Couldn't set parameter: {go_quote(exc.message)}")
        return
    click.echo(f"Set parameter '{name}' to '{', '.join(values)}'")


def _show(backend: HttpBackend, session: Session, what: str) -> None:
    try:
        show = backend.show(session.model, system=session.system, options=session.options)
    except CllmError:
        click.echo("error: couldn't get model")
        return
    if what == "info":
        click.echo(show_text(show).lstrip("\n"))
    elif what == "license":
        click.echo(show.get("license") or "No license was specified for this model.")
    elif what == "modelfile":
        click.echo(show.get("modelfile", ""))
    elif what == "parameters":
        click.echo("Model defined parameters:")
        params = (show.get("parameters") or "").strip()
        if not params:
            click.echo("  No additional parameters were specified for this model.")
        for line in params.splitlines():
            click.echo(f"  {line}")
        click.echo()
        if session.options:
            click.echo("User defined parameters:")
            for key, value in session.options.items():
                click.echo(f"  {key:<30} {value}")
            click.echo()
    elif what == "system":
        system = session.system or show.get("system")
        click.echo(system + "\n" if system else "No system message was specified for this model.")
    elif what == "template":
        click.echo(show.get("template") or "No prompt template was specified for this model.")
    else:
        click.echo(f"Unknown command '/show {what}'. Type /? for help")


def _set_system(session: Session, text: str) -> None:
    session.system = text
    message = {"role": "system", "content": text}
    if session.messages and session.messages[-1]["role"] == "system":
        session.messages[-1] = message
    else:
        session.messages.append(message)
    click.echo("Set system message.")


def _history(enabled: bool) -> None:
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows
        return
    readline.set_auto_history(enabled)


class Repl:
    """The interactive loop: lines in, commands answered locally, messages sent to the model."""

    def __init__(
        self, backend: HttpBackend, session: Session, read: Callable[[str], str] = input, editor: str = ""
    ) -> None:
        self.backend, self.session, self.read = backend, session, read
        self.editor = editor  # OLLAMA_EDITOR, for Ctrl+G
        self.buffer: list[str] = []
        self.multiline: str = ""  # "", "prompt" or "system"

    def run(self) -> None:
        while True:
            try:
                line = self.read("... " if self.multiline else ">>> ")
            except EOFError:
                click.echo()
                return
            except KeyboardInterrupt:
                if not self.multiline and not self.buffer:
                    click.echo("\nUse Ctrl + d or /bye to exit.")
                else:
                    click.echo()
                self.buffer, self.multiline = [], ""
                continue
            if line.startswith(EDIT_MARK):
                self.compose(line[len(EDIT_MARK) :])
                continue
            if self.handle(line) == "bye":
                return

    def compose(self, text: str) -> None:
        """Ctrl+G: ``text`` (the line so far) composed in the editor, then on the next prompt to be
        sent or changed; a multi-line message begun is dropped, as ollama's is."""
        forget_marked_line()
        self.buffer, self.multiline = [], ""
        try:
            content = compose(text, self.editor)
        except EditorError as exc:
            click.echo(f"error: {exc}", err=True)
            return
        if content.strip():
            prefill_next(content)

    def handle(self, line: str) -> str | None:
        session = self.session
        if self.multiline:
            before, ended = (line[: -len(MULTILINE)], True) if line.endswith(MULTILINE) else (line, False)
            self.buffer.append(before)
            if not ended:
                return None
            kind, self.multiline = self.multiline, ""
            text, self.buffer = "\n".join(self.buffer), []
            if kind == "system":
                _set_system(session, text)
                return None
            self.send(text)
            return None
        stripped = line.strip()
        if line.startswith(MULTILINE):
            rest = line[len(MULTILINE) :]
            if rest.endswith(MULTILINE) and len(rest) >= len(MULTILINE):
                self.send(rest[: -len(MULTILINE)])
                return None
            self.buffer, self.multiline = [rest], "prompt"
            return None
        if stripped in ("/bye", "/exit") or stripped.startswith(("/bye ", "/exit ")):
            return "bye"
        if not stripped.startswith("/"):
            if stripped:
                self.send(line)
            return None
        args = stripped.split()
        command = args[0]
        if command in ("/?", "/help"):
            topic = args[1].lstrip("/") if len(args) > 1 else ""
            usage = {"set": USAGE_SET, "show": USAGE_SHOW, "shortcut": USAGE_SHORTCUTS, "shortcuts": USAGE_SHORTCUTS}
            main = USAGE + USAGE_FILES if session.multimodal else USAGE
            click.echo(usage.get(topic, main if not topic else ""), nl=False)
        elif command == "/set":
            self.set(args, stripped)
        elif command == "/show":
            if len(args) < 2:
                click.echo(USAGE_SHOW, nl=False)
            else:
                _show(self.backend, session, args[1])
        elif command == "/clear":
            session.messages = [{"role": "system", "content": session.system}] if session.system else []
            click.echo("Cleared session context")
        elif command == "/list":
            echo_models(self.backend.tags(), datetime.now().astimezone())
        elif command == "/load":
            self.load(args)
        elif command == "/save":
            self.save(args)
        elif session.multimodal and any(name.startswith(command) for name in file_names(stripped)):
            self.send(line)  # a prompt that begins with a file's path
        else:
            click.echo(f"Unknown command '{command}'. Type /? for help")
        return None

    def set(self, args: list[str], line: str) -> None:
        session = self.session
        if len(args) < 2:
            click.echo(USAGE_SET, nl=False)
            return
        what = args[1]
        if what in ("history", "nohistory"):
            _history(what == "history")
        elif what in ("wordwrap", "nowordwrap"):
            session.wordwrap = what == "wordwrap"
            click.echo(f"Set '{what}' mode.")
        elif what in ("verbose", "quiet"):
            session.verbose = what == "verbose"
            click.echo(f"Set '{what}' mode.")
        elif what == "think":
            # Any level, as Ollama's /set think: the server says which it takes when a message goes.
            level = args[2] if len(args) > 2 else ""
            session.think = level or True
            click.echo(f"Set 'think' mode to '{level}'." if level else "Set 'think' mode.")
        elif what == "nothink":
            session.think = False
            click.echo("Set 'nothink' mode.")
        elif what == "format":
            if len(args) < 3 or args[2] != "json":
                click.echo("Invalid or missing format. For 'json' mode use '/set format json'")
                return
            session.format = "json"
            click.echo("Set format to 'json' mode.")
        elif what == "noformat":
            session.format = ""
            click.echo("Disabled format.")
        elif what == "parameter":
            if len(args) < 4:
                click.echo(USAGE_PARAMETERS, nl=False)
                return
            _set_parameter(session, args[2], args[3:])
        elif what == "system":
            if len(args) < 3:
                click.echo(USAGE_SET, nl=False)
                return
            text = line.split(None, 2)[2]
            if text.startswith(MULTILINE):
                text = text[len(MULTILINE) :]
                if not (text.endswith(MULTILINE) and len(text) >= len(MULTILINE)):
                    self.buffer, self.multiline = [text], "system"
                    return
                text = text[: -len(MULTILINE)]
            _set_system(session, text)
        else:
            click.echo(f"Unknown command '/set {what}'. Type /? for help")

    def load(self, args: list[str]) -> None:
        if len(args) != 2:
            click.echo("Usage:\n  /load <modelname>")
            return
        click.echo(f"Loading model '{args[1]}'")
        try:
            show = self.backend.show(args[1])
        except CllmError:
            click.echo(f"Couldn't find model '{args[1]}'")
            return
        self.session.model = args[1]
        # Ollama keeps the first model's answer here; the model now loaded is the one that sees or not.
        self.session.multimodal = supports_media(show)
        self.session.loaded_messages = list(show.get("messages") or [])
        self.session.messages = []
        self.session.system = ""
        load_model(self.backend, self.session)

    def save(self, args: list[str]) -> None:
        if len(args) != 2:
            click.echo("Usage:\n  /save <modelname>")
            return
        session = self.session
        body: dict[str, Any] = {"model": args[1], "from": session.model}
        # What the model was saved with, then this session's turns (Ollama's NewCreateRequest): the
        # create replaces the model's messages, so a session saved again keeps its start.
        messages = session.loaded_messages + [m for m in session.messages if m["role"] != "system"]
        if messages:
            body["messages"] = messages
        if session.system:
            body["system"] = session.system
        if session.options:
            body["parameters"] = session.options
        try:
            self.backend.stream("/api/create", body, lambda _: None)
        except CllmError as exc:
            click.echo(f"error: {exc.message}")
            return
        click.echo(f"Created new model '{args[1]}'")

    def send(self, text: str) -> None:
        session = self.session
        try:
            message = session.user_message(text)
        except FileError:
            return None  # said on stderr; unlike Ollama, which ends the session, the session goes on
        session.messages.append(message)
        try:
            answer = reply(self.backend, session, wrap=session.wordwrap)
        except CllmError as exc:
            # Ollama goes on after these; a refused file (audio to a model that only sees) too, here.
            if any(phrase in exc.message for phrase in _TURN_REFUSALS):
                click.echo(f"error: {exc.message}")
                session.messages.pop()
                return None
            raise
        if answer is not None:
            session.messages.append(answer)
        return None


def load_model(backend: HttpBackend, session: Session) -> None:
    """Load the model before the first prompt, as ``ollama run`` does (an empty chat)."""
    body: dict[str, Any] = {"model": session.model, "messages": []}
    if session.keep_alive is not None:
        body["keep_alive"] = session.keep_alive
    backend.stream("/api/chat", body | {"stream": False}, lambda _: None)


def history_path() -> Path:
    """Where lines typed in sessions are kept, as Ollama keeps ``~/.ollama/history``."""
    return Path.home() / ".cllm" / "history"


def interactive(backend: HttpBackend, session: Session, *, history: bool = True, editor: str = "") -> None:
    """A session as `ollama run` offers: line history kept across sessions (unless ``history`` is
    off: OLLAMA_NOHISTORY); Ctrl+G composes a prompt in ``editor`` (OLLAMA_EDITOR); /bye (or
    Ctrl+D) leaves."""
    try:
        import readline  # line editing, history and bracketed paste for input()
    except ImportError:  # pragma: no cover - Windows has none
        readline = None  # type: ignore[assignment]
    path = history_path()
    if readline is not None:
        # What input() took before (the launcher's menu answers) and an earlier session's lines are
        # not this session's: a second session in one process would keep them twice.
        readline.clear_history()
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
        if not history:
            _history(False)
        bind_compose_key()
    load_model(backend, session)
    for message in session.loaded_messages:  # a saved session's turns, as ollama run shows them
        if message.get("role") == "user":
            click.echo(f">>> {message.get('content', '')}")
        elif message.get("role") == "assistant":
            click.echo(f"{message.get('content', '')}\n")
    try:
        Repl(backend, session, editor=editor).run()
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                readline.set_history_length(_HISTORY_LINES)
                readline.write_history_file(path)
            readline.clear_history()
