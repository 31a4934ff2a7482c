"""`cllm run`, `stop`, `-v`, `ps` as an Ollama user drives them: the interactive session through a
pseudo-terminal (pexpect), Ctrl+C mid-answer included; one-shot prompts and piped stdin."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import httpx
import pytest
from click.testing import CliRunner
from cllm_ollama.cli import chat
from cllm_ollama.cli.backend import HttpBackend
from cllm_ollama.cli.main import cli
from cllm_ollama.cli.render import human_time, running_table, show_text
from fakehub import FakeHub
from polling import until
from prometheus_client.parser import text_string_to_metric_families
from serving import serve_in_thread

from cllm_ollama import OLLAMA_COMPAT_VERSION
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings, proxied
from cllm_ollama.store.create import CreateRequest, create_model, import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

pexpect = pytest.importorskip("pexpect")
CLLM = str(Path(sys.executable).parent / "cllm")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A server holding ``tiny`` and ``endless`` (never stops by itself); the env that points the CLI at it."""
    root = tmp_path_factory.mktemp("run")
    store = ModelStore(root / "models")
    q8 = gguf.GGMLQuantizationType.Q8_0
    import_gguf(store, "base", write_qwen3(root / "tiny.gguf", qtype=q8))
    # Short greedy answers: a random model's own end of answer may be thousands of tokens away.
    body = {"model": "tiny", "from": "base", "parameters": {"num_predict": 8, "temperature": 0}}
    create_model(store, CreateRequest.from_json(body), lambda _: None)
    import_gguf(store, "endless", write_qwen3(root / "endless.gguf", qtype=q8, endless=True))
    settings = Settings(models_dir=root / "models", num_parallel=2, context_length=4096, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        yield {"OLLAMA_HOST": url, "OLLAMA_MODELS": str(root / "cli-models"), "HOME": str(root), "TERM": "dumb"}


def running(url: str) -> float:
    """Requests ``endless`` has in a slot, as the server's gateway gauge counts them."""
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "vllm:num_requests_running" and sample.labels.get("model_name") == "endless:latest":
                return sample.value
    return 0.0


def spawn(env: dict[str, str], *args: str, **options: Any) -> Any:
    child = pexpect.spawn(CLLM, list(args), env={**os.environ, **env}, encoding="utf-8", timeout=60, **options)
    child.setwinsize(40, 120)
    return child


def ended(child: Any) -> int | None:
    """The exit status of ``child`` once its output has ended (None: a signal ended it)."""
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus  # type: ignore[no-any-return]


@pytest.mark.model
def test_interactive_commands_are_answered_locally(served: dict[str, str]) -> None:
    child = spawn(served, "run", "tiny")
    child.expect_exact(">>> ")
    steps = [
        ("/set parameter temperature 0", "Set parameter 'temperature' to '0'"),
        ("/set parameter num_predict 5", "Set parameter 'num_predict' to '5'"),
        ("/set parameter num_ctx x", 'Couldn\'t set parameter: "invalid int value [x]"'),
        ("/set parameter temprature 0", "Couldn't set parameter: \"unknown parameter 'temprature'\""),
        ("/show info", "architecture"),
        ("/show parameters", "User defined parameters:"),
        ("/show license", "No license was specified for this model."),
        ("/show template", "{%"),
        ("/show nonsense", "Unknown command '/show nonsense'. Type /? for help"),
        ("/foo", "Unknown command '/foo'. Type /? for help"),
        ("/set foo", "Unknown command '/set foo'. Type /? for help"),
        ("/?", 'Use """ to begin a multi-line message.'),
        ("/? set", "/set parameter ...     Set a parameter"),
        ("/set format json", "Set format to 'json' mode."),
        ("/set noformat", "Disabled format."),
        ("/set format yaml", "Invalid or missing format. For 'json' mode use '/set format json'"),
        ("/set nothink", "Set 'nothink' mode."),
        ("/set think high", "Set 'think' mode to 'high'."),
        ("/set nothink", "Set 'nothink' mode."),
        ("/set nowordwrap", "Set 'nowordwrap' mode."),
        ("/set nohistory", ">>> "),
        ("/set history", ">>> "),
        ('/set system """You are', "... "),
        ('terse."""', "Set system message."),
        ("/show system", "You are\r\nterse."),
        ("/show modelfile", "PARAMETER num_predict 5\r\n"),  # the session's, as ollama run sends them
        ("/set verbose", "Set 'verbose' mode."),
        ('"""Hello', "... "),
        ('there"""', "eval count:           5 token(s)"),
        ("/set quiet", "Set 'quiet' mode."),
        ("/save", "Usage:\r\n  /save <modelname>"),
        ("/save terse", "Created new model 'terse'"),
        ("/clear", "Cleared session context"),
        ("/list", "terse:latest"),
        ("/load nope", "Couldn't find model 'nope'"),
        ("/load endless", "Loading model 'endless'"),
    ]
    for line, answer in steps:
        child.sendline(line)
        child.expect_exact(answer)
    child.expect_exact(">>> ")
    child.sendline("/bye")
    assert ended(child) == 0
    # Lines are kept for the next session (not those typed while history was off).
    history = (Path(served["HOME"]) / ".cllm" / "history").read_text()
    assert "/set parameter temperature 0\n" in history and "\n/set history\n" not in history
    # /save made a model of the session: its system message and parameters.
    saved = CliRunner().invoke(cli, ["show", "terse", "--system"], env=served).output
    assert saved == "You are\nterse.\n"
    parameters = CliRunner().invoke(cli, ["show", "terse", "--parameters"], env=served).output
    assert "temperature" in parameters and "num_predict" in parameters
    # OLLAMA_NOHISTORY: a session that keeps none of its lines (the earlier ones stay).
    child = spawn(served | {"OLLAMA_NOHISTORY": "1"}, "run", "tiny")
    child.expect_exact(">>> ")
    child.sendline("/set parameter seed 7")
    child.expect_exact("Set parameter 'seed' to '7'")
    child.sendline("/bye")
    child.expect(pexpect.EOF)
    child.close()
    kept = (Path(served["HOME"]) / ".cllm" / "history").read_text()
    assert "/set parameter seed 7" not in kept and "/set parameter temperature 0\n" in kept


@pytest.mark.model  # the chat it opens loads the model
def test_a_bare_cllm_on_a_terminal_is_ollamas_launcher_menu(served: dict[str, str], fake_hub: FakeHub) -> None:
    """``cllm`` alone on a terminal, as ``ollama`` alone: a menu of a chat and the agents (those not
    installed marked so); a wrong pick or a missing agent is said and the menu comes back; a chat
    picks its model from the server's (or its recommendations, pulled first) and returns to the
    menu at /bye; q leaves."""
    env = served | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    child = spawn(env)
    child.expect_exact("1. Chat with a model")
    child.expect_exact("2. Launch Claude Code (not installed)")
    child.expect_exact("Select (q to quit)")
    child.sendline("9")
    child.expect_exact("Error: '9' is not on the menu: a number from 1 to 8, or q")
    child.sendline("²")
    child.expect_exact("Error: '²' is not on the menu")
    child.expect_exact("Select (q to quit)")
    child.sendline("2")
    child.expect_exact(
        "Error: Claude Code is not installed: install it with `npm install -g @anthropic-ai/claude-code`"
    )
    child.expect_exact("Select (q to quit)")
    child.sendline("1")
    child.expect(r"(\d+)\. tiny")
    number = child.match.group(1)
    # The server's recommendations not there yet follow, to pull (none of its cloud ones).
    child.expect(r"(\d+)\. gemma4  Reasoning and code generation locally, ~12GB, \(not downloaded\)")
    gemma = child.match.group(1)
    child.expect_exact("Model")
    assert ":cloud" not in child.before
    child.sendline(gemma)  # pulled first, from a registry (the fake hub's) without it: said, and back
    child.expect_exact("Error: pull model manifest: file does not exist")
    child.expect_exact("Select (q to quit)")
    child.sendline("1")
    child.expect_exact("Model")
    child.sendline(number)
    child.expect_exact(">>> ")
    child.sendline("/bye")
    child.expect_exact("Select (q to quit)")
    child.sendline("q")
    assert ended(child) == 0
    # `cllm launch` alone is the same menu ("equivalent to running 'ollama' directly").
    child = spawn(env, "launch")
    child.expect_exact("8. Launch Qwen Code (not installed)")
    child.expect_exact("Select (q to quit)")
    child.sendline("")
    assert ended(child) == 0


def ignore_ctrl_c() -> None:
    """What a shell without job control does to a command run with ``&``, which its children
    inherit (a test suite so started spawns every CLI so): SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.model
def test_ctrl_c_stops_the_answer_and_keeps_the_session(served: dict[str, str]) -> None:
    # Started with SIGINT ignored, as every CLI is when the suite itself was (which gives exactly what
    # one full run in four saw: Ctrl+C lost, the answer run to its end). Python leaves it ignored;
    # only the CLI taking it back lets Ctrl+C stop the answer.
    child = spawn(served, "run", "endless", "--think=false", "--verbose", preexec_fn=ignore_ctrl_c)
    child.expect_exact(">>> ")
    child.sendline("Hi")
    url = served["OLLAMA_HOST"]
    until(lambda: running(url) == 1)  # the CLI's request is in a slot: an endless answer is under way
    child.sendintr()
    child.expect_exact(">>> ", timeout=10)
    assert "eval count" not in child.before  # stopped: no summary of a finished answer
    until(lambda: running(url) == 0)  # and the server stopped generating it
    child.sendline("/set verbose")
    child.expect_exact("Set 'verbose' mode.")
    child.sendintr()  # at an empty prompt: how to leave
    child.expect_exact("Use Ctrl + d or /bye to exit.")
    child.sendeof()
    assert ended(child) == 0


@pytest.mark.model
def test_ctrl_g_composes_the_prompt_in_the_editor(served: dict[str, str], tmp_path: Path) -> None:
    """``ollama run``'s Ctrl+G: the line so far opens in OLLAMA_EDITOR, what it writes comes back
    on the prompt to be sent; an editor that is not there is said, and the session goes on."""
    seen = tmp_path / "seen.txt"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" {seen}\nprintf "%s\\nfrom the editor\\n" "$(cat "$1")" > "$1"\n')
    editor.chmod(0o755)
    child = spawn(served | {"OLLAMA_EDITOR": str(editor)}, "run", "tiny")
    child.expect_exact(">>> ")
    child.send("Hello there\x07")  # Ctrl+G
    child.expect_exact("from the editor")  # back on the prompt, not sent yet
    assert seen.read_text() == "Hello there"
    child.send("\r")
    child.expect_exact(">>> ")  # answered
    child.sendline("/bye")
    assert ended(child) == 0
    history = (Path(served["HOME"]) / ".cllm" / "history").read_text()
    assert "Hello there" in history and "compose" not in history  # the marked line left no trace
    child = spawn(served | {"OLLAMA_EDITOR": str(tmp_path / "no-such-editor")}, "run", "tiny")
    child.expect_exact(">>> ")
    child.send("Hi\x07")
    child.expect_exact("not found, set OLLAMA_EDITOR to the path of your preferred editor")
    child.expect_exact(">>> ")
    child.sendline("/bye")
    child.expect(pexpect.EOF)


@pytest.mark.model
def test_one_shot_verbose_and_a_missing_model(served: dict[str, str], fake_hub: FakeHub, tiny_gguf: Path) -> None:
    env = {**os.environ, **served}
    out = pexpect.run(f"{CLLM} run tiny --think=false --verbose Hi", env=env, encoding="utf-8", withexitstatus=True)
    text, status = out
    assert status == 0 and "eval count:           8 token(s)" in text and "total duration:" in text, text[-2000:]
    # A missing model is pulled first (the server pulls from the fake hub), then answers.
    fake_hub.add("test/Tiny-GGUF", "tiny-Q8_0.gguf", tiny_gguf.read_bytes())
    text, status = pexpect.run(
        f"{CLLM} run hf.co/test/Tiny-GGUF --think=false --format json Hi",
        env=env,
        encoding="utf-8",
        withexitstatus=True,
    )
    assert status == 0 and "success" in text, text[-2000:]
    text, status = pexpect.run(f"{CLLM} run hf.co/nobody/nothing Hi", env=env, encoding="utf-8", withexitstatus=True)
    assert status == 1 and text.strip().splitlines()[-1].startswith("Error: ")


def test_piped_stdin_goes_before_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """As Ollama: stdin content, then the prompt's words, joined by a space; no session starts."""
    sent: list[dict[str, Any]] = []

    def stream(self: HttpBackend, path: str, body: dict[str, Any], report: Any) -> None:
        sent.append({"path": path, **body})
        report({"message": {"role": "assistant", "content": "ok"}, "done": True, "eval_count": 1})

    monkeypatch.setattr(HttpBackend, "stream", stream)
    monkeypatch.setattr(HttpBackend, "show", lambda self, name, verbose=False: {"capabilities": ["completion"]})
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: HttpBackend("http://127.0.0.1:9"))
    args = ["run", "m", "--format", "json", "--keepalive", "10m", "--think=high", "Summarise"]
    result = CliRunner().invoke(cli, args, input="some text\n")
    assert result.exit_code == 0, result.output
    assert result.output == "ok\n\n"  # a blank line after the answer, as Ollama's CLI leaves
    (body,) = sent
    assert body["messages"] == [{"role": "user", "content": "some text\n Summarise"}]
    assert body["format"] == "json" and body["keep_alive"] == "10m" and body["think"] == "high"
    sent.clear()
    # `--think` takes a value only as `--think=value`: a following word is the prompt's.
    assert CliRunner().invoke(cli, ["run", "m", "--think", "Why?", "--hidethinking"], input="").exit_code == 0
    assert sent[0]["think"] is True and sent[0]["messages"] == [{"role": "user", "content": "Why?"}]
    sent.clear()
    # Before the model too: the flag does not take the model's name (pflag's bare-valued flag).
    assert CliRunner().invoke(cli, ["run", "--think", "m", "Why?", "--verbose=false"], input="").exit_code == 0
    assert sent[0]["model"] == "m" and sent[0]["think"] is True and "Why?" in sent[0]["messages"][0]["content"]
    sent.clear()
    wrong = CliRunner().invoke(cli, ["run", "m", "--think=maybe", "Hi"], input="")
    assert wrong.exit_code == 1 and not sent
    assert 'invalid value for --think: "maybe" (must be true, false, high, medium, low, or max)' in wrong.output
    bad_bool = CliRunner().invoke(cli, ["run", "m", "--verbose=maybe", "Hi"], input="")
    assert bad_bool.exit_code == 1 and 'invalid argument "maybe" for "--verbose" flag' in bad_bool.output
    # A JSON schema on the command line goes as the object it is; `max` is a thinking level.
    schema = '{"type": "object", "properties": {"a": {"type": "string"}}}'
    assert CliRunner().invoke(cli, ["run", "m", "--format", schema, "--think=max", "Hi"], input="").exit_code == 0
    assert sent[0]["format"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert sent[0]["think"] == "max"
    sent.clear()
    # Bytes that are not UTF-8, piped or in an argument, go as U+FFFD (Go's json.Marshal), not a traceback.
    assert CliRunner().invoke(cli, ["run", "m", "caf\udce9?"], input=b"na\xefve\n").exit_code == 0
    assert sent[0]["messages"] == [{"role": "user", "content": "na\ufffdve\n caf\ufffd?"}]


def test_a_reader_that_closes_stdout_ends_run_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cllm run m ... | head -n1`: no `Error: [Errno 32] Broken pipe` (ollama dies of SIGPIPE, silently)."""

    def stream(self: HttpBackend, path: str, body: dict[str, Any], report: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(HttpBackend, "stream", stream)
    monkeypatch.setattr(HttpBackend, "show", lambda self, name, verbose=False: {"capabilities": ["completion"]})
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: HttpBackend("http://127.0.0.1:9"))
    result = CliRunner().invoke(cli, ["run", "m", "Hi"], input="")
    assert "Broken pipe" not in result.output and "Error" not in result.output


def test_the_cli_reaches_a_loopback_server_past_any_proxy() -> None:
    """HTTP_PROXY is never used for localhost or a loopback address, as Go's ProxyFromEnvironment."""
    assert not any(
        proxied(u) for u in ("http://127.0.0.1:11434", "http://localhost:1", "http://[::1]:2", "http://127.3.4.5")
    )
    assert proxied("http://gpu-box:11434") and proxied("https://10.0.0.5:443")


def test_run_with_no_prompt_loads_the_model_and_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ollama run MODEL ""` (or empty stdin): the model is loaded, nothing asked, nothing printed."""
    loads: list[tuple[str, str | None]] = []
    monkeypatch.setattr(HttpBackend, "stream", lambda self, path, body, report: pytest.fail("asked the model"))
    monkeypatch.setattr(HttpBackend, "load", lambda self, name, keep_alive: loads.append((name, keep_alive)))
    monkeypatch.setattr(HttpBackend, "show", lambda self, name, verbose=False: {"capabilities": ["completion"]})
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: HttpBackend("http://127.0.0.1:9"))
    for args in (["run", "m", ""], ["run", "m", "--keepalive", "1h"]):
        result = CliRunner().invoke(cli, args, input="")
        assert (result.exit_code, result.output) == (0, "")
    assert loads == [("m", None), ("m", "1h")]
    # An embedding model has nothing to load for: it needs the text.
    monkeypatch.setattr(HttpBackend, "show", lambda self, name, verbose=False: {"capabilities": ["embedding"]})
    empty = CliRunner().invoke(cli, ["run", "emb"], input="")
    assert empty.exit_code == 1
    assert empty.output == 'Error: embedding models require input text. Usage: cllm run emb "your text here"\n'


def test_run_sends_an_embedding_s_truncate_and_dimensions_as_ollama_run_does(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []

    def embed(self: HttpBackend, name: str, text: str, keep_alive: str | None, **fields: Any) -> list[list[float]]:
        sent.append({"input": text, **fields})
        return [[0.5]]

    monkeypatch.setattr(HttpBackend, "embed", embed)
    monkeypatch.setattr(HttpBackend, "show", lambda self, name, verbose=False: {"capabilities": ["embedding"]})
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: HttpBackend("http://127.0.0.1:9"))
    for args in (["--dimensions", "256", "--truncate=false", "t"], ["t"], ["--truncate", "hello", "u"]):
        result = CliRunner().invoke(cli, ["run", "emb", *args], input="")
        assert (result.exit_code, result.output) == (0, "[0.5]\n"), result.output
    assert sent == [
        {"input": "t", "truncate": False, "dimensions": 256},
        {"input": "t", "truncate": None, "dimensions": 0},
        {"input": "hello u", "truncate": True, "dimensions": 0},  # a bool flag: the word after it is the text's
    ]


def test_a_push_to_ollama_com_says_where_the_model_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HttpBackend, "push", lambda self, name, report, insecure=False: report({"status": "success"}))
    monkeypatch.setattr("cllm_ollama.cli.main.connect", lambda settings: HttpBackend("http://127.0.0.1:9"))
    result = CliRunner().invoke(cli, ["push", "me/model"])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("success\n\nYou can find your model at:\n\n\thttps://ollama.com/me/model\n")
    # A registry that refuses the push: Ollama's words for it.
    from cllm_ollama.errors import CllmError

    def refused(self: HttpBackend, name: str, report: Any, insecure: bool = False) -> None:
        raise CllmError("unauthorized: access denied", 401)

    monkeypatch.setattr(HttpBackend, "push", refused)
    result = CliRunner().invoke(cli, ["push", "me/model"])
    assert result.exit_code == 1 and result.output == (
        "Error: you are not authorized to push to this namespace, create the model under a namespace you own\n"
    )


def test_run_pulls_a_missing_model_first(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def show(self: HttpBackend, name: str, verbose: bool = False) -> dict[str, Any]:
        calls.append("show")
        if len(calls) == 1:
            from cllm_ollama.errors import CllmError

            raise CllmError(f"model '{name}' not found", 404)
        return {"capabilities": ["embedding"]}

    monkeypatch.setattr(HttpBackend, "show", show)
    monkeypatch.setattr(HttpBackend, "pull", lambda self, name, report, insecure: calls.append(f"pull {insecure}"))
    monkeypatch.setattr(HttpBackend, "embed", lambda self, name, text, keep_alive, **fields: [[0.5, -1.0]])
    monkeypatch.setattr("cllm_ollama.cli.main.server", lambda settings: HttpBackend("http://127.0.0.1:9"))
    result = CliRunner().invoke(cli, ["run", "emb", "hello", "--insecure"])
    assert result.exit_code == 0, result.output
    assert calls == ["show", "pull True", "show"]  # --insecure: the pull may use plain HTTP
    assert result.output.splitlines()[-1] == "[0.5, -1.0]"  # an embedding model prints its vector


@pytest.mark.model
def test_stop_ps_and_version(served: dict[str, str]) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "tiny", "--think=false", "Hi"], env=served).exit_code == 0
    ps = runner.invoke(cli, ["ps"], env=served).output
    assert "tiny:latest" in ps and "100% CPU" in ps and "minutes from now" in ps
    assert runner.invoke(cli, ["stop", "tiny"], env=served).exit_code == 0
    assert "tiny" not in runner.invoke(cli, ["ps"], env=served).output
    missing = runner.invoke(cli, ["stop", "nope"], env=served)
    assert missing.exit_code == 1 and missing.output == 'Error: couldn\'t find model "nope" to stop\n'
    version = runner.invoke(cli, ["-v"], env=served)
    assert version.exit_code == 0 and version.output == f"cllm version is {OLLAMA_COMPAT_VERSION}\n"


def test_version_without_a_server_warns(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--version"], env={"OLLAMA_HOST": "127.0.0.1:9"})
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "Warning: could not connect to a running cllm instance",
        f"Warning: client version is {OLLAMA_COMPAT_VERSION} (cllm {__import__('cllm_ollama').__version__})",
    ]


def test_ps_columns_as_ollama_words_them() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 1, tzinfo=UTC)

    def row(vram: int, until: datetime) -> dict[str, Any]:
        return {"name": "m:latest", "digest": "a" * 64, "size": 1000, "size_vram": vram, "context_length": 4096} | {
            "expires_at": until.isoformat(),
            "num_parallel": 8,
            "requests_running": 2,
            "requests_queued": 3,
        }

    lines = running_table(
        [
            row(0, now + timedelta(seconds=30)),
            row(1000, now + timedelta(minutes=4, seconds=5)),
            row(250, now - timedelta(seconds=1)),
            row(0, now + timedelta(days=365 * 300)),
        ],
        now,
    ).splitlines()
    assert lines[0].split() == ["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL", "RUNNING", "QUEUED"]
    cells = [line.split("    ") for line in lines[1:]]
    assert [[c.strip() for c in row if c.strip()][3:] for row in cells] == [
        ["100% CPU", "4096", "30 seconds from now", "2/8", "3"],
        ["100% GPU", "4096", "4 minutes from now", "2/8", "3"],
        ["75%/25% CPU/GPU", "4096", "Stopping...", "2/8", "3"],
        ["100% CPU", "4096", "Forever", "2/8", "3"],
    ]


def test_list_says_how_long_ago_in_ollamas_words() -> None:
    """format.HumanTime: "About" a minute or an hour, rounded hours up to two days, then days,
    weeks and months up to twice their unit."""
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 1, tzinfo=UTC)
    ago = [90, 3600, 5400, 30 * 3600, 10 * 86400, 40 * 86400, 400 * 86400, 800 * 86400, -150]
    assert [human_time(now - timedelta(seconds=s), now) for s in ago] == [
        "About a minute ago",
        "About an hour ago",
        "2 hours ago",
        "30 hours ago",
        "10 days ago",
        "5 weeks ago",
        "13 months ago",
        "2 years ago",
        "2 minutes from now",
    ]


def test_show_has_ollamas_projector_section() -> None:
    show = {
        "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072},
        "details": {"parameter_size": "4.3B", "quantization_level": "Q4_K_M"},
        "capabilities": ["completion", "vision"],
        "projector_info": {
            "general.architecture": "clip",
            "general.parameter_count": 416866032,
            "clip.vision.embedding_length": 1152,
            "clip.vision.projection_dim": 2560.0,
        },
    }
    text = show_text(show)
    projector = text[text.index("  Projector") :].split("\n\n")[0].splitlines()
    assert [re.split(r"\s{2,}", line.strip()) for line in projector] == [
        ["Projector"],
        ["architecture", "clip"],
        ["parameters", "416.87M"],
        ["embedding length", "1152"],
        ["dimensions", "2560"],
    ]
    assert "Projector" not in show_text(show | {"projector_info": None})


def test_show_verbose_prints_ollamas_metadata_and_tensors() -> None:
    show = {
        "model_info": {
            "general.architecture": "qwen2",
            "qwen2.rope.freq_base": 1000000.0,
            "qwen2.context_length": 32768,
            "tokenizer.ggml.tokens": ["!", '"', "#", "$", "%"],
            "tokenizer.ggml.add_bos_token": False,
            "tokenizer.ggml.merges": None,
        },
        "details": {"quantization_level": "Q4_K_M"},
        "tensors": [{"name": "token_embd.weight", "type": "Q4_K", "shape": [896, 151936]}],
        "system": "\n  Be brief.  \n\nAnswer in English.\nThird line.\n",
    }
    text = show_text(show, verbose=True)

    def rows(title: str) -> list[list[str]]:
        block = text[text.index(f"  {title}\n") :].split("\n\n")[0].splitlines()[1:]
        return [re.split(r"\s{2,}", line.strip()) for line in block]

    assert rows("Metadata") == [
        ["general.architecture", "qwen2"],
        ["qwen2.context_length", "32768"],
        ["qwen2.rope.freq_base", "1e+06"],  # Go's %g
        ["tokenizer.ggml.add_bos_token", "false"],
        ["tokenizer.ggml.merges", "<nil>"],
        ["tokenizer.ggml.tokens", '[! " # ...+2 more]'],
    ]
    assert rows("Tensors") == [["token_embd.weight", "Q4_K", "[896 151936]"]]
    assert rows("System") == [["Be brief."], ["Answer in English."], ["..."]]  # blank lines skipped
    assert "Metadata" not in show_text(show) and "Tensors" not in show_text(show)


def test_go_durations_and_word_wrap() -> None:
    assert [chat.go_duration(n) for n in (0, 999, 1_500, 12_345_678, 1_500_000_000, 62_500_000_000)] == [
        "0s",
        "999ns",
        "1.5µs",
        "12.345678ms",
        "1.5s",
        "1m2.5s",
    ]
    out: list[str] = []
    wrap = chat.WordWrap(out.append, 10)
    wrap.feed("The quick brown fox jumps\nover")
    wrap.close()
    assert "".join(out) == "The quick \nbrown fox \njumps\nover"


def test_save_keeps_the_turns_the_model_was_saved_with(capsys: pytest.CaptureFixture[str]) -> None:
    """`cllm run sess` (a saved session), more turns, `/save`: the model's own messages come first,
    as ollama's NewCreateRequest sends them; the create replaces them, so they would be lost."""
    sent: list[tuple[str, dict[str, Any]]] = []

    class Backend:
        def stream(self, path: str, body: dict[str, Any], report: Any) -> None:
            sent.append((path, body))

    before = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    now = [{"role": "user", "content": "And?"}, {"role": "assistant", "content": "Then."}]
    session = chat.Session("sess", messages=[{"role": "system", "content": "S"}, *now], loaded_messages=before)
    chat.Repl(Backend(), session).save(["/save", "sess2"])  # type: ignore[arg-type]
    assert sent == [("/api/create", {"model": "sess2", "from": "sess", "messages": before + now})]
    assert capsys.readouterr().out == "Created new model 'sess2'\n"
