"""The ``cllm`` command: serve, and the ollama-style model commands (pull, list, show, cp, rm, create)."""

from __future__ import annotations

import errno
import json
import logging
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx
import uvicorn

from cllm_ollama import OLLAMA_COMPAT_VERSION, __version__
from cllm_ollama.api.middleware.auth import AccessLogRedaction
from cllm_ollama.api.middleware.drain import Drain
from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import ConfigError, Settings, proxied
from cllm_ollama.errors import CllmError
from cllm_ollama.gostrconv import go_quote
from cllm_ollama.store.modelfile import parse_modelfile, read_modelfile
from cllm_ollama.store.names import parse_name

from .attachments import FileError, supports_media
from .backend import PROBE_TIMEOUT_S, Backend, HttpBackend, auth_headers, connect, server
from .bench import bench_command
from .chat import Session, catch_ctrl_c, interactive, parse_think, reply
from .flags import VALUE_SUFFIX, GoFlags
from .launch import INTEGRATIONS, Target, environ_with, find_integration, usage
from .progress import ProgressPrinter
from .render import echo_models, running_table, show_text


class CommandError(click.ClickException):
    """A failure the user can act on: printed as one ``Error: ...`` line, exit status 1."""


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn store, server and network failures into ``CommandError`` (no traceback)."""
    try:
        yield
    except CllmError as exc:
        raise CommandError(exc.message) from exc
    except BrokenPipeError:
        raise  # stdout closed by its reader (`| head`): click leaves quietly, as ollama dies of SIGPIPE
    except (ConfigError, OSError) as exc:
        raise CommandError(str(exc)) from exc
    except httpx.HTTPError as exc:
        raise CommandError(f"lost the connection to the server: {exc}") from exc


def _settings() -> Settings:
    with user_errors():
        return Settings.from_env()


B = TypeVar("B", bound=Backend)


def _backend() -> Backend:
    """The server, or the store where none runs and CLLM_LOCAL_STORE allows: closed when the command ends."""
    with user_errors():
        return _closed_with_command(connect(_settings()))


def _server() -> HttpBackend:
    """The running server (the commands that need the engine): closed when the command ends."""
    return _closed_with_command(server(_settings()))


def _closed_with_command(backend: B) -> B:
    if isinstance(backend, HttpBackend):
        click.get_current_context().call_on_close(backend.close)
    return backend


class _Server(uvicorn.Server):
    """uvicorn, telling the app when shutdown starts: streams then get a grace period, not forever."""

    def __init__(self, config: uvicorn.Config, drain: Drain) -> None:
        super().__init__(config)
        self.drain = drain

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:  # bound: Ollama's line, which scripts wait for
            config = self.config
            logging.getLogger("cllm").info(
                "Listening on %s:%d (version %s)", config.host, config.port, OLLAMA_COMPAT_VERSION
            )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.drain.begin()
        await super().shutdown(sockets=sockets)


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``-v/--version``: the server's version, and the client's when they differ (as ``ollama -v``)."""
    if not value or ctx.resilient_parsing:
        return
    client = f"{OLLAMA_COMPAT_VERSION} (cllm {__version__})"
    try:
        settings = Settings.from_env()
        url = settings.host.url
        answer = httpx.get(
            url + "/api/version", headers=auth_headers(settings), timeout=PROBE_TIMEOUT_S, trust_env=proxied(url)
        )
        served = answer.json().get("version", "")
    except (ConfigError, httpx.HTTPError, ValueError, AttributeError):
        served = ""
        click.echo("Warning: could not connect to a running cllm instance")
    if served:
        click.echo(f"cllm version is {served}")
    if served != OLLAMA_COMPAT_VERSION:
        click.echo(f"Warning: client version is {client}")
    ctx.exit()


# The values ``--think=VALUE`` takes (Ollama's cmd.go; a session's /set think takes yes/no/on/off too).
FLAG_THINK_VALUES = ("true", "false", "high", "medium", "low", "max")


class UsageError(click.UsageError):
    """A usage error with cobra's exit status, 1."""

    exit_code = 1


class OllamaExits(click.Group):
    """Ollama's exit statuses (cobra's): a usage error exits 1, not click's 2, and no command at all
    shows the help and exits 0. The messages stay click's, which say more than cobra's. Its commands
    take flag values as Ollama's do (``flags.GoFlags``); on a terminal, no command opens the
    launcher menu instead, as a bare ``ollama`` does."""

    command_class = GoFlags

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            if _on_terminal():
                _launcher(ctx)
            else:
                click.echo(ctx.get_help())
            ctx.exit(0)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise UsageError(e.format_message(), e.ctx) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # a command's own arguments, or no such command
            raise UsageError(e.format_message(), e.ctx) from None


@click.group("cllm", cls=OllamaExits, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-v",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Show version information.",
)
def cli() -> None:
    """A drop-in Ollama server with continuous batching over llama.cpp."""


@cli.command("serve")
def serve_command() -> None:
    """Start the server on OLLAMA_HOST (default 127.0.0.1:11434)."""
    settings = _settings()
    logging.basicConfig(
        level=logging.DEBUG if settings.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not settings.debug:
        # llama.cpp describes every model it loads at length: only its warnings by default.
        logging.getLogger("cllm.llama").setLevel(logging.WARNING)
    with user_errors():  # before anything starts: a port in use fails at once, as Ollama's net.Listen
        sockets = listening_sockets(settings.host.host, settings.host.port)
    app = create_app(settings)
    # uvicorn's own limit is the backstop for what the drain cannot end (a request stuck in a thread).
    config = uvicorn.Config(
        app,
        host=settings.host.host,
        port=settings.host.port,
        timeout_graceful_shutdown=int(settings.shutdown_grace) + 5,
    )
    # After uvicorn configured its loggers: a key sent as ?key= never reaches the access log.
    logging.getLogger("uvicorn.access").addFilter(AccessLogRedaction())
    _Server(config, services(app).drain).run(sockets=sockets)


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """The server's socket, bound: for a wildcard address one that takes IPv4 and IPv6 at once
    (``wildcard_sockets``), else the address as given. A port in use is an ``OSError`` in Go's
    words (``listen tcp 127.0.0.1:11434: bind: address already in use``), as Ollama exits with."""
    try:
        wildcard = wildcard_sockets(host, port)
        if wildcard is not None:
            return wildcard
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        return [socket.create_server((host, port), family=family)]
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise OSError(f"listen tcp {address}: bind: address already in use") from None


def wildcard_sockets(host: str, port: int) -> list[socket.socket] | None:
    """For a wildcard address (``0.0.0.0``, ``::``, or none as in ``:8080``), one socket that takes
    IPv4 and IPv6 at once, as Go's ``net.Listen`` serves it for Ollama (one of uvicorn's would be
    IPv4 only, or IPv6 only for ``::``, where cllm's CLI then could not reach it); None elsewhere."""
    if host not in ("", "0.0.0.0", "::") or not socket.has_dualstack_ipv6():
        return None
    try:
        return [socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)]
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise
        logging.getLogger("cllm").warning("cannot listen on IPv4 and IPv6 at once (%s): on %r as asked", exc, host)
        return None  # IPv6 off in this kernel or container: the address as asked


cli.add_command(serve_command, "start")


@cli.command("pull")
@click.argument("name")
@click.option("--insecure", is_flag=True, help="Use an insecure registry (plain HTTP).")
def pull_command(name: str, insecure: bool) -> None:
    """Pull a model: from Ollama's registry (llama3.1, host[:port]/ns/model:tag) or the Hugging Face Hub
    (the catalog's names such as qwen3:0.6b, hf.co/<user>/<repo>[:quant])."""
    printer = ProgressPrinter()
    try:
        with user_errors():
            _backend().pull(name, printer, insecure=insecure)
    finally:
        printer.close()


PUSH_REFUSED = "you are not authorized to push to this namespace, create the model under a namespace you own"


@cli.command("push")
@click.argument("name")
@click.option("--insecure", is_flag=True, help="Use an insecure registry (plain HTTP).")
def push_command(name: str, insecure: bool) -> None:
    """Push a model to a registry (host[:port]/namespace/model:tag)."""
    printer = ProgressPrinter()
    try:
        with user_errors():
            wanted = parse_name(name)
            try:
                _backend().push(name, printer, insecure=insecure)
            except CllmError as exc:
                if "access denied" in exc.message.lower():  # the registry refused it: Ollama's words
                    raise CommandError(PUSH_REFUSED) from exc
                raise
    finally:
        printer.close()
    # Where the model now is, as Ollama's CLI ends a push (ollama.com's page for its own registry).
    where = str(wanted)
    if wanted.host.lower().endswith((".ollama.ai", ".ollama.com")):
        where = "https://ollama.com/" + wanted.display_shortest().removesuffix(":latest")
    click.echo(f"\nYou can find your model at:\n\n\t{where}")


@cli.command("list")
@click.argument("prefix", nargs=-1)
def list_command(prefix: tuple[str, ...]) -> None:
    """List models (those whose name starts with PREFIX, in any case, as in Ollama)."""
    with user_errors():
        models = _backend().tags()
    if prefix:
        models = [m for m in models if m["name"].lower().startswith(prefix[0].lower())]
    echo_models(models, datetime.now().astimezone())


cli.add_command(list_command, "ls")


SHOW_ONE_FIELD = "only one of '--license', '--modelfile', '--parameters', '--system', or '--template' can be specified"


@cli.command("show")
@click.argument("name")
@click.option("--license", is_flag=True, help="Show the license.")
@click.option("--modelfile", is_flag=True, help="Show the Modelfile.")
@click.option("--parameters", is_flag=True, help="Show the parameters.")
@click.option("--system", is_flag=True, help="Show the system message.")
@click.option("--template", is_flag=True, help="Show the template.")
@click.option("--verbose", "-v", is_flag=True, help="Include the full metadata arrays and tensors.")
def show_command(name: str, verbose: bool, **fields: bool) -> None:
    """Show information about a model."""
    chosen = [field for field, on in fields.items() if on]
    if len(chosen) > 1:
        raise CommandError(SHOW_ONE_FIELD)
    with user_errors():
        show = _backend().show(name, verbose=verbose)
    if not chosen:
        click.echo(show_text(show, verbose))
    else:
        click.echo(show.get(chosen[0]) or "")


@cli.command("cp")
@click.argument("source")
@click.argument("destination")
def copy_command(source: str, destination: str) -> None:
    """Copy a model."""
    with user_errors():
        _backend().copy(source, destination)
    click.echo(f"copied '{source}' to '{destination}'")


@cli.command("rm")
@click.argument("names", nargs=-1, required=True)
def remove_command(names: tuple[str, ...]) -> None:
    """Remove one or more models."""
    backend = _backend()
    for name in names:
        with user_errors():
            backend.delete(name)
        click.echo(f"deleted '{name}'")


@cli.command("create")
@click.argument("name")
@click.option(
    "--file",
    "-f",
    "modelfile",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The Modelfile to build from [default: ./Modelfile, else FROM . (this folder)].",
)
@click.option("--quantize", "-q", default="", help="Quantize model to this level (e.g. q4_K_M).")
@click.option("--draft-quantize", default="", help="Quantize draft model to this level.")
def create_command(name: str, modelfile: Path | None, quantize: str, draft_quantize: str) -> None:
    """Create a model from a Modelfile (FROM a .gguf file or an existing model)."""
    printer = ProgressPrinter()
    try:
        with user_errors():
            # As ollama create: without -f and without ./Modelfile, this folder is the model (FROM .).
            path = modelfile or Path("Modelfile")
            text = "FROM .\n" if modelfile is None and not path.exists() else read_modelfile(path)
            _backend().create(name, parse_modelfile(text), path.resolve().parent, printer, quantize, draft_quantize)
    finally:
        printer.close()


@cli.command("run")
@click.argument("model")
@click.argument("prompt", nargs=-1)
@click.option("--verbose", is_flag=True, help="Show timings for the response.")
@click.option("--format", "fmt", default="", help='Response format (e.g. "json").')
@click.option("--keepalive", default=None, help='How long the model stays loaded (e.g. "5m").')
@click.option(
    "--think",
    is_flag=True,
    flag_value="true",
    default=None,
    help="Let a thinking model think first; --think=false, high, medium, low or max [default: the model's].",
)
@click.option(f"--think{VALUE_SUFFIX}", "think_value", default=None, hidden=True)  # --think=VALUE
@click.option("--no-think", "no_think", is_flag=True, hidden=True)
@click.option("--hidethinking", is_flag=True, help="Hide the thinking output (when thinking).")
@click.option("--nowordwrap", is_flag=True, help="Do not wrap words to the next line automatically.")
@click.option("--insecure", is_flag=True, help="Use an insecure registry (plain HTTP) if the model must be pulled.")
@click.option(
    "--truncate/--no-truncate",
    default=None,
    help="For embedding models: truncate inputs exceeding context length (default: true). "
    "Set --truncate=false to error instead",
)
@click.option(
    "--dimensions",
    type=int,
    default=0,
    help="Truncate output embeddings to specified dimension (embedding models only)",
)
def run_command(
    model: str,
    prompt: tuple[str, ...],
    verbose: bool,
    fmt: str,
    keepalive: str | None,
    think: str | None,
    think_value: str | None,
    no_think: bool,
    hidethinking: bool,
    nowordwrap: bool,
    insecure: bool,
    truncate: bool | None,
    dimensions: int,
) -> None:
    """Run a model: answer PROMPT (or what stdin holds), or start an interactive session (needs `cllm serve`)."""
    catch_ctrl_c()
    prompts = [_utf8(word) for word in prompt]
    if think_value is not None:  # --think=VALUE: Ollama's words only
        if think_value not in FLAG_THINK_VALUES:
            raise UsageError(
                f"invalid value for --think: {go_quote(think_value)} (must be true, false, high, medium, low, or max)"
            )
        think = think_value
    stdin_is_terminal = sys.stdin.isatty()
    if not stdin_is_terminal:
        # As Ollama does: piped input goes before the prompt's words, and no session starts.
        piped = sys.stdin.buffer.read().decode("utf-8", "replace")
        if piped:
            prompts.insert(0, piped)
    with user_errors():
        session = Session(
            model,
            format=fmt,
            think=False if no_think else parse_think(think),
            hide_thinking=hidethinking,
            verbose=verbose,
            wordwrap=not nowordwrap and stdin_is_terminal and sys.stdout.isatty(),
            keep_alive=keepalive,
        )
        backend = _server()
        show = _present(backend, model, insecure)
        capabilities = show.get("capabilities") or []
        text = " ".join(prompts)
        if "embedding" in capabilities and "completion" not in capabilities:
            if not text:
                raise CommandError(f'embedding models require input text. Usage: cllm run {model} "your text here"')
            vectors = backend.embed(model, text, keepalive, truncate=truncate, dimensions=dimensions)
            for vector in vectors:
                click.echo(json.dumps(vector))
            return
        session.multimodal = supports_media(show)
        session.loaded_messages = list(show.get("messages") or [])
        if prompts or not stdin_is_terminal or not sys.stdout.isatty():
            if not text:  # no prompt: the model is loaded, nothing is asked (Ollama's preload idiom)
                backend.load(model, keepalive)
                return
            try:
                session.messages.append(session.user_message(text))
            except FileError as exc:
                raise CommandError(str(exc)) from exc
            reply(backend, session, wrap=session.wordwrap)
        else:
            settings = _settings()
            interactive(backend, session, history=not settings.nohistory, editor=settings.editor)


def _utf8(word: str) -> str:
    """An argument's bytes that are not UTF-8 (Python's surrogates for them) as U+FFFD, as Go's
    json.Marshal writes them, not surrogates that the request's encoding refuses."""
    return word.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _present(backend: HttpBackend, model: str, insecure: bool) -> dict[str, Any]:
    """The model's /api/show, pulling it first when it is not there (as `ollama run` does, from a
    plain-HTTP registry with ``--insecure``)."""
    try:
        return backend.show(model)
    except CllmError as exc:
        if exc.status_code != 404:
            raise
    printer = ProgressPrinter()
    try:
        backend.pull(model, printer, insecure=insecure)
    finally:
        printer.close()
    return backend.show(model)


@cli.command("stop")
@click.argument("model")
def stop_command(model: str) -> None:
    """Stop a running model (unload it now)."""
    with user_errors():
        try:
            _server().unload(model)
        except CllmError as exc:
            if "not found" in exc.message:
                raise CommandError(f'couldn\'t find model "{model}" to stop') from exc
            raise


@cli.command("ps")
@click.argument("prefix", nargs=-1)
def ps_command(prefix: tuple[str, ...]) -> None:
    """List the models in memory (needs `cllm serve`), those whose name starts with PREFIX."""
    with user_errors():
        models = _server().running()
    if prefix:  # case-sensitive here, as in Ollama
        models = [m for m in models if m["name"].startswith(prefix[0])]
    click.echo(running_table(models, datetime.now().astimezone()))


# Where ``launch`` keeps what followed ``--`` on its command line: the agent's own arguments.
AGENT_ARGS = "cllm.launch.agent_args"


class LaunchArgs(GoFlags):
    """``launch``'s command line as cobra reads Ollama's: what follows ``--`` is the agent's, kept
    apart (``AGENT_ARGS``), so that arguments before it besides the integration can be refused."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            ctx.meta[AGENT_ARGS] = tuple(args[args.index("--") + 1 :])
            args = args[: args.index("--")]
        return super().parse_args(ctx, args)


@cli.command("launch", cls=LaunchArgs)
@click.argument("integration", required=False)
@click.argument("stray", nargs=-1, type=click.UNPROCESSED, metavar="[-- ARGS]")
@click.option("--model", default="", help="Model to use.")
@click.option("--config", "config_only", is_flag=True, help="Print the configuration without launching.")
@click.option(
    "-y", "--yes", is_flag=True, help="Answer yes to confirmation prompts (cllm asks none: for Ollama's scripts)."
)
@click.option("--restore", is_flag=True, help="Remove the files cllm's launches wrote for the integration.")
def launch_command(
    integration: str | None, stray: tuple[str, ...], model: str, config_only: bool, yes: bool, restore: bool
) -> None:
    """Launch an agent (claude: Claude Code, codex: Codex, copilot: Copilot CLI, droid: Droid,
    opencode: OpenCode, pi: Pi, qwen: Qwen Code) on a model of this server, as `ollama launch` does; its own
    arguments go after `--`; with none named, the launcher menu on a terminal (as a bare `cllm`),
    else the list. ``--yes``, the headless form's flag (``ollama launch claude --model M --yes --
    -p ...``), is taken: cllm pulls a missing model without asking, as ``run`` does, and asks
    nothing else. ``--restore`` removes the files cllm's launches wrote in the agent's folder (Codex's
    catalog, Droid's settings, Pi's extension, Qwen Code's defaults); the agent's own are untouched."""
    dashed = click.get_current_context().meta.get(AGENT_ARGS)  # None: no `--`
    if stray and dashed is None:  # Ollama's words
        raise CommandError(
            f"unexpected arguments: [{' '.join(stray)}]\nUse '--' to pass extra arguments to the integration"
        )
    if stray:
        raise CommandError(f"expected at most 1 integration name before '--', got {1 + len(stray)}")
    extra: tuple[str, ...] = dashed or ()
    if integration is None:
        if model or config_only or extra or yes or restore:
            raise CommandError(
                "flags and extra args require an integration name, for example: 'cllm launch claude --model qwen3'"
            )
        if _on_terminal():  # "equivalent to running 'ollama' directly"
            _launcher(click.get_current_context())
        else:
            click.echo(usage())
        return
    agent = find_integration(integration)
    if agent is None:
        raise CommandError(f"unknown integration {integration!r}: cllm launches {', '.join(INTEGRATIONS)}")
    if restore:  # Ollama's words; nothing of the server's is needed
        if model or config_only or extra:
            raise CommandError("--restore cannot be combined with --model, --config, or extra args")
        if agent.restore() is None:
            raise CommandError(f"{agent.name} does not support --restore")
        click.echo(f"{agent.title} launch configuration removed.", err=True)
        return
    binary = agent.find()  # before a model's pull, which may be long
    if binary is None and not config_only:
        raise CommandError(agent.missing())
    unmet = None if binary is None or config_only else agent.unmet(binary)
    if unmet:
        raise CommandError(unmet)
    settings = _settings()
    with user_errors():
        backend = _server()
        model = model or _choose_model(backend)
        show = _present(backend, model, insecure=False)
    target = Target.of(settings, model, show)
    launch = agent.launch(binary or agent.binary, target, extra)
    if config_only:
        click.echo(launch.shell())
        return
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the agent's to handle
    try:
        returncode = subprocess.run(launch.argv, env=environ_with(launch.env), check=False).returncode
    finally:
        signal.signal(signal.SIGINT, interrupt)
    click.get_current_context().exit(returncode)


def _on_terminal() -> bool:
    """Whether a person is at both ends (stdin and stdout a terminal), as Ollama's isInteractiveSession."""
    return sys.stdin.isatty() and sys.stdout.isatty()


# The launcher's first item; the others launch the integrations.
CHAT_ITEM = ("Chat with a model", "Talk to a model of this server here, as `cllm run` does")


def _launcher(ctx: click.Context) -> None:
    """Bare ``cllm`` on a terminal: Ollama's launcher (its ``runInteractiveTUI``) as a numbered menu.
    Chat with a model here or launch an agent on one, the model picked from the server's, then back
    to the menu when that ends; ``q``, an empty answer or Ctrl-D leaves. An error (no server, an
    agent not installed) is said and the menu comes back, as Ollama's does."""
    with user_errors():
        backend = _server()  # it answers before the menu shows, as Ollama checks its heartbeat first
    agents = list(INTEGRATIONS.values())
    while True:
        rows = [
            CHAT_ITEM,
            *((f"Launch {a.title}" + ("" if a.find() else " (not installed)"), a.description) for a in agents),
        ]
        click.echo(f"\ncllm {__version__}\n")
        for n, (title, description) in enumerate(rows, 1):
            click.echo(f"{n:>3}. {title}\n       {description}")
        try:
            answer = click.prompt("\nSelect (q to quit)", default="q", show_default=False).strip().lower()
        except click.Abort:
            click.echo()
            return
        if answer in ("q", "quit", "exit"):
            return
        if not (answer.isascii() and answer.isdigit()) or not 1 <= int(answer) <= len(rows):
            click.echo(f"Error: {answer!r} is not on the menu: a number from 1 to {len(rows)}, or q", err=True)
            continue
        agent = agents[int(answer) - 2] if int(answer) > 1 else None
        try:
            if agent is not None and agent.find() is None:
                raise CommandError(agent.missing())
            with user_errors():
                model = _choose_model(backend)
            if agent is None:
                ctx.invoke(run_command, model=model)
            else:
                ctx.invoke(launch_command, integration=agent.name, model=model)
        except click.exceptions.Exit:
            pass
        except click.ClickException as exc:
            exc.show()
        except (click.Abort, KeyboardInterrupt):  # Ctrl-C or Ctrl-D in a pick or a pull: back to the menu
            click.echo()


def _choose_model(backend: HttpBackend) -> str:
    """The model the user picks on the terminal (else ``--model`` is needed): the server's, then the
    local models it recommends that are not there yet, as Ollama's launcher lists them (``(not
    downloaded)``; cloud ones are left out, the cloud being off), which the caller then pulls."""
    if not sys.stdin.isatty():
        raise CommandError("--model is required when not run from a terminal")
    names = [m["name"] for m in backend.tags()]
    rows = list(names)
    for rec in backend.recommendations():
        name = rec["model"]
        if name.endswith((":cloud", "-cloud")) or name in names or f"{name}:latest" in names:
            continue
        names.append(name)
        details = [rec.get("description") or "", _vram(rec), "(not downloaded)"]
        rows.append(f"{name}  " + ", ".join(d for d in details if d))
    if not names:
        raise CommandError("no models yet: pull one first (`cllm pull qwen3`), or name one with --model")
    for i, row in enumerate(rows, 1):
        click.echo(f"{i:>3}. {row}")
    return names[click.prompt("Model", type=click.IntRange(1, len(names))) - 1]


def _vram(recommendation: dict[str, Any]) -> str:
    """A recommendation's memory as Ollama's launcher shows it (``~12GB``), or nothing."""
    size = recommendation.get("vram_bytes")
    if not isinstance(size, int) or size <= 0:
        return ""
    gb = size / 1e9
    return f"~{gb:.0f}GB" if gb == int(gb) else f"~{gb:.1f}GB"


cli.add_command(bench_command)


def main() -> None:
    cli.main()
