"""The agents ``cllm launch`` starts pointed at this server, as ``ollama launch`` points them at
Ollama's (cmd/launch): the command line and environment of each, and where its binary is.

Claude Code talks to ``/v1/messages`` (``ANTHROPIC_BASE_URL``), every model tier the served model,
with Ollama's settings for a local server. Codex talks to ``/v1/responses`` through a provider set
on its command line (``-c``; Ollama writes a profile into its config instead, which cllm leaves as
the user has it), with a model catalog as Ollama writes one (the model's context window and
whether it sees), in ``cllm-launch-models-MODEL.json`` beside Codex's config. OpenCode talks to
``/v1/chat/completions`` through an OpenAI-compatible provider given in
``OPENCODE_CONFIG_CONTENT``, as Ollama gives it (nothing written into its config files). The
Copilot CLI talks to ``/v1/responses`` as a custom provider given in its ``COPILOT_PROVIDER_*``
variables, with the model's limits. Droid talks to ``/v1/chat/completions`` as a custom model in a
settings file of cllm's that it merges for the run. Qwen Code talks to ``/v1/chat/completions`` as
``ollama launch qwen`` points it there (``OPENAI_*``), its provider and the model's context given
as system defaults of cllm's rather than in its settings. Pi talks to ``/v1/chat/completions`` through
a provider an extension file of cllm's registers for the run (``-e``), where Ollama writes one into
its ``models.json``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cllm_ollama.config import Settings

# The provider name Codex is given for this server.
CODEX_PROVIDER = "cllm"
# The token Claude Code sends where the server wants no key (Ollama sends "ollama").
NO_KEY = "cllm"


@dataclass(frozen=True)
class Launch:
    """An agent's command line and the environment it runs in (on top of the caller's)."""

    argv: list[str]
    env: dict[str, str]

    def shell(self) -> str:
        """The launch as shell lines a user can keep: the exports, then the command."""
        exports = [f"export {k}={shlex.quote(v)}" for k, v in self.env.items()]
        return "\n".join([*exports, shlex.join(self.argv)])


@dataclass(frozen=True)
class Target:
    """The server an agent is pointed at, and the model it uses there."""

    url: str
    model: str
    key: str  # the server's API key ("": it wants none)
    context: int  # tokens the model is served with at most
    vision: bool
    thinking: bool = False
    families: tuple[str, ...] = ()  # its details' family and families

    @property
    def v1(self) -> str:
        """The server's OpenAI-compatible base URL, where most agents are pointed."""
        return self.url.rstrip("/") + "/v1"

    @classmethod
    def of(cls, settings: Settings, model: str, show: Mapping[str, Any]) -> Target:
        """The server of ``settings`` and its ``model`` (its ``/api/show``): the context it may grow
        to, capped at the model's trained one, and whether it sees."""
        info = show.get("model_info") or {}
        trained = info.get(f"{info.get('general.architecture')}.context_length")
        served = max(settings.context_length, settings.context_grow)
        context = min(served, trained) if isinstance(trained, int) and trained > 0 else served
        capabilities = show.get("capabilities") or []
        details = show.get("details") or {}
        families = tuple(f for f in [details.get("family"), *(details.get("families") or [])] if isinstance(f, str))
        return cls(
            settings.host.url,
            model,
            settings.client_api_key or "",
            context,
            "vision" in capabilities,
            "thinking" in capabilities,
            families,
        )


@dataclass(frozen=True)
class Integration:
    """An agent ``cllm launch NAME`` starts: its binary, and how it is pointed at the server."""

    name: str
    title: str
    binary: str
    package: str  # npm's, to say how to install it
    plan: Callable[[Target, Sequence[str]], tuple[list[str], dict[str, str]]]
    fallbacks: tuple[str, ...] = ()  # where its installer puts it besides PATH (under HOME)
    description: str = ""  # Ollama's, for the launcher menu
    aliases: tuple[str, ...] = ()  # other names Ollama's launch takes for it
    node: tuple[int, ...] = ()  # the oldest Node.js its npm package runs on, where newer than npm's floor
    launch_files: LaunchFiles | None = None  # the files of cllm's its launches write

    def find(self) -> str | None:
        """The agent's binary: on PATH, else where its own installer puts it."""
        found = shutil.which(self.binary)
        if found:
            return found
        home = Path.home()
        return next((str(home / f) for f in self.fallbacks if (home / f).is_file()), None)

    def missing(self) -> str:
        """What to say when the agent is not installed: how to install it."""
        return (
            f"{self.title} is not installed: install it with `npm install -g {self.package}`, "
            f"then run `cllm launch {self.name}` again"
        )

    def unmet(self, binary: str) -> str | None:
        """What to say when ``binary`` is a Node.js script and the Node it runs on is older than the
        agent's oldest (it would fail with a stack trace of its own), else None."""
        if not self.node:
            return None
        try:
            with open(binary, "rb") as script:
                line = script.readline(200).decode(errors="replace")
            words = line[2:].split() if line.startswith("#!") else []
            if not words or not any(Path(w).name == "node" for w in words):
                return None  # a native binary, or another interpreter's script
            node = shutil.which("node") if Path(words[0]).name == "env" else words[0]
            said = subprocess.run([node or "node", "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None  # nothing known: the agent says what it finds itself
        found = tuple(int(n) for n in re.findall(r"\d+", said)[:3])
        if not found or found >= self.node:
            return None
        return (
            f"{self.title} needs Node.js {'.'.join(map(str, self.node))} or later, and runs on {said.strip()} here: "
            f"install a newer Node.js (https://nodejs.org/), then run `cllm launch {self.name}` again"
        )

    def restore(self) -> list[Path] | None:
        """Remove the files cllm's launches wrote for the agent (``ollama launch codex --restore``
        removes what Ollama wrote into Codex's config); the files removed, None where a launch
        writes none."""
        return None if self.launch_files is None else self.launch_files.remove()

    def launch(self, binary: str, target: Target, extra: Sequence[str]) -> Launch:
        """The launch of ``binary`` against ``target``, ``extra`` the agent's own arguments."""
        args, env = self.plan(target, extra)
        return Launch([binary, *args], env)


def _claude(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    model = target.model
    env = {
        "ANTHROPIC_BASE_URL": target.url,
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_AUTH_TOKEN": target.key or NO_KEY,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "CLAUDE_CODE_SUBAGENT_MODEL": model,
        "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
        # Its "tokens left" reminder after each tool result is a system message, which goes to
        # the front of the prompt: every request would read the prompt anew (Ollama's #17918).
        "CLAUDE_CODE_TOTAL_TOKENS_REMINDER": "off",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_FEEDBACK_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    }
    return ["--model", model, *extra], env


def _codex(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    provider = f"model_providers.{CODEX_PROVIDER}"
    settings = {
        "model_provider": CODEX_PROVIDER,
        "model": target.model,
        "model_catalog_json": str(_codex_catalog(target)),
        f"{provider}.name": "cllm",
        f"{provider}.base_url": target.v1,
        f"{provider}.wire_api": "responses",
    }
    env = {}
    if target.key:  # sent as a Bearer token from the variable the provider names
        settings[f"{provider}.env_key"] = "CLLM_LAUNCH_API_KEY"
        env["CLLM_LAUNCH_API_KEY"] = target.key
    args = [a for k, v in settings.items() for a in ("-c", f"{k}={json.dumps(v)}")]
    return [*args, *extra], env


def _codex_catalog(target: Target) -> Path:
    """Codex's catalog entry for the model, as ``ollama launch codex`` writes it (Codex otherwise
    warns that it knows nothing of the model, and assumes a context window of its own)."""
    entry = {
        "slug": target.model,
        "display_name": target.model,
        "context_window": target.context,
        "shell_type": "default",
        "visibility": "list",
        "supported_in_api": True,
        "priority": 0,
        "truncation_policy": {"mode": "bytes", "limit": 10000},
        "input_modalities": ["text", "image"] if target.vision else ["text"],
        "base_instructions": "",
        "support_verbosity": True,
        "default_verbosity": "low",
        "supports_parallel_tool_calls": False,
        "supports_reasoning_summaries": False,
        "supported_reasoning_levels": [],
        "experimental_supported_tools": [],
    }
    return CODEX_FILES.write(target.model, {"models": [entry]})


def _codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def _factory_home() -> Path:
    return Path(os.environ.get("FACTORY_HOME_OVERRIDE") or Path.home()) / ".factory"


def _pi_home() -> Path:
    return Path(os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent")


def _qwen_home() -> Path:
    return Path(os.environ.get("QWEN_HOME") or Path.home() / ".qwen")


@dataclass(frozen=True)
class LaunchFiles:
    """Files of cllm's in an agent's folder, one per model (``cllm-launch-KIND-MODEL.json``, what a
    file name cannot hold in the name as ``-``): launches on two models at once, or a launch kept
    from ``--config``, each read their own; ``--restore`` removes them, and only them."""

    home: Callable[[], Path]  # the agent's folder, as its environment names it
    kind: str
    suffix: str = ".json"

    def write(self, model: str, content: dict[str, Any] | str) -> Path:
        """The file for ``model`` with ``content``: JSON's, or the file's text."""
        home = self.home()
        home.mkdir(parents=True, exist_ok=True)
        path = home / f"cllm-launch-{self.kind}-{re.sub(r'[^A-Za-z0-9._-]', '-', model)}{self.suffix}"
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
        return path

    def remove(self) -> list[Path]:
        """Remove every model's file; the files removed."""
        files = sorted(f for f in self.home().glob(f"cllm-launch-{self.kind}-*{self.suffix}") if f.is_file())
        for path in files:
            path.unlink(missing_ok=True)
        return files


CODEX_FILES = LaunchFiles(_codex_home, "models")
DROID_FILES = LaunchFiles(_factory_home, "settings")
PI_FILES = LaunchFiles(_pi_home, "pi", ".mjs")
QWEN_FILES = LaunchFiles(_qwen_home, "defaults")


# The provider OpenCode is given for this server, and its model id there: ``cllm/MODEL``.
OPENCODE_PROVIDER = "cllm"
# The most output tokens an agent is told to ask for (a coding turn's edits fit; more would take
# that much from the prompt's room before it compacts).
AGENT_OUTPUT = 8192


def _output_limit(target: Target) -> int:
    """The output tokens an agent is told the model gives at most: a quarter of the context served,
    at most ``AGENT_OUTPUT``."""
    return max(1, min(target.context // 4, AGENT_OUTPUT))


def _opencode(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """OpenCode's inline config (``ollama launch opencode``'s ``buildInlineConfig``): an
    ``@ai-sdk/openai-compatible`` provider at ``/v1`` with the model, which it starts on. Unlike
    Ollama's (which gives a limit only for cloud models), the entry has the context the model is
    served with, so that OpenCode compacts a long session itself before cllm would cut it, and for
    the output (its ``max_tokens``, and what it keeps free of the context) a quarter of that, at
    most ``AGENT_OUTPUT`` tokens."""
    entry: dict[str, Any] = {
        "name": target.model,
        "limit": {"context": target.context, "output": _output_limit(target)},
    }
    if target.vision:
        entry["modalities"] = {"input": ["text", "image"], "output": ["text"]}
    if target.thinking:
        entry["reasoning"] = True
        if any(f.lower().replace("-", "").replace("_", "") == "gptoss" for f in (*target.families, target.model)):
            levels = ("low", "medium", "high", "max")
            entry["options"] = {"reasoningEffort": "medium"}
            entry["variants"] = {level: {"reasoningEffort": level} for level in levels}
        else:  # thinking on or off, no levels
            entry["variants"] = {"none": {"reasoningEffort": "none"}} | {
                level: {"disabled": True} for level in ("low", "medium", "high")
            }
    options: dict[str, Any] = {"baseURL": target.v1}
    if target.key:
        options["apiKey"] = target.key
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "cllm",
                "options": options,
                "models": {target.model: entry},
            }
        },
        "model": f"{OPENCODE_PROVIDER}/{target.model}",
    }
    return list(extra), {"OPENCODE_CONFIG_CONTENT": json.dumps(config)}


def _copilot(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """GitHub's Copilot CLI on a custom provider (its BYOK variables) at ``/v1`` over the Responses
    API, as ``ollama launch copilot`` sets it. Unlike Ollama's, the model's limits are given
    (``COPILOT_PROVIDER_MAX_PROMPT_TOKENS`` and ``..._OUTPUT_TOKENS``: the served context, less a
    quarter of it, at most ``AGENT_OUTPUT``, for the answer), so that it compacts a long session
    itself rather than assuming a window it does not know."""
    output = _output_limit(target)
    env = {
        "COPILOT_PROVIDER_BASE_URL": target.v1,
        "COPILOT_PROVIDER_API_KEY": target.key,
        "COPILOT_PROVIDER_WIRE_API": "responses",
        "COPILOT_MODEL": target.model,
        "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": str(target.context - output),
        "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS": str(output),
    }
    return ["--model", target.model, *extra], env


def _droid(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Factory's Droid on the model as a custom model at ``/v1`` (chat completions), the entry and
    the session's default model as ``ollama launch droid`` writes them into ``~/.factory/settings.json``;
    cllm writes them into a settings file of its own that Droid merges for this run (``--settings``),
    and asks for no more output than the model is served to give (``_output_limit``)."""
    model_id = f"custom:cllm-{target.model}"
    entry = {
        "model": target.model,
        "displayName": target.model,
        "baseUrl": target.v1,
        "apiKey": target.key or NO_KEY,
        "provider": "generic-chat-completion-api",
        "maxOutputTokens": _output_limit(target),
        "supportsImages": target.vision,
        "id": model_id,
        "index": 0,
    }
    settings = {"customModels": [entry], "sessionDefaultSettings": {"model": model_id, "reasoningEffort": "none"}}
    return ["--settings", str(DROID_FILES.write(target.model, settings)), *extra], {}


# The provider Pi is given for this server (its models ``cllm/MODEL``).
PI_PROVIDER = "cllm"
# Pi's subcommands, which it takes only as its first argument (a launch of one passes it as given).
PI_COMMANDS = frozenset({"install", "remove", "uninstall", "update", "list", "config", "mcp", "auth"})


def _pi(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Pi on the OpenAI-compatible API at ``/v1`` (chat completions), as ``ollama launch pi`` points
    it there. Ollama writes an ``ollama`` provider into Pi's ``models.json`` and the default model
    into its ``settings.json``; cllm gives the provider as an extension of its own that Pi loads for
    the run (``-e``), with the served context and an output limit (``_output_limit``) so that Pi
    compacts a long session itself, and starts Pi on the model unless the arguments name one. Pi's
    subcommands (``pi install ...``) run as given."""
    if extra and extra[0] in PI_COMMANDS:
        return list(extra), {}
    model: dict[str, Any] = {
        "id": target.model,
        "name": target.model,
        "reasoning": target.thinking,
        "input": ["text", "image"] if target.vision else ["text"],
        "contextWindow": target.context,
        "maxTokens": _output_limit(target),
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }
    if target.thinking:  # Pi's "off" sends no effort at all, which leaves a thinking model thinking
        model["thinkingLevelMap"] = {"off": "none"}
    provider = {
        "name": PI_PROVIDER,
        "baseUrl": target.v1,
        "api": "openai-completions",
        "apiKey": "$CLLM_LAUNCH_API_KEY",  # read from the environment, kept out of the file
        "models": [model],
    }
    source = (
        f"export default (pi) => pi.registerProvider({json.dumps(PI_PROVIDER)}, {json.dumps(provider, indent=2)});\n"
    )
    args = ["-e", str(PI_FILES.write(target.model, source)), *extra]
    if not _has_flag(extra, "--model", "--provider", "--models"):
        args = ["--provider", PI_PROVIDER, "--model", target.model, *args]
    return args, {"CLLM_LAUNCH_API_KEY": target.key or NO_KEY}


def _qwen_system_defaults() -> Path:
    """Where Qwen Code reads the system's defaults when ``QWEN_CODE_SYSTEM_DEFAULTS_PATH`` names no
    file (its ``getSystemDefaultsPath``): beside its system settings, wherever those are."""
    settings = os.environ.get("QWEN_CODE_SYSTEM_SETTINGS_PATH")
    if settings:
        return Path(settings).parent / "system-defaults.json"
    if sys.platform == "darwin":
        return Path("/Library/Application Support/QwenCode/system-defaults.json")
    if sys.platform == "win32":
        return Path("C:/ProgramData/qwen-code/system-defaults.json")
    return Path("/etc/qwen-code/system-defaults.json")


def _qwen(target: Target, extra: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Qwen Code on the OpenAI-compatible API at ``/v1``, as ``ollama launch qwen`` runs it
    (``OPENAI_*``, ``--auth-type openai --model M`` unless the arguments given name them). Ollama
    also writes its provider into ``~/.qwen/settings.json``; cllm gives its provider as system
    defaults instead (:func:`_qwen_defaults`), which every setting of the user's overrides."""
    args = list(extra)
    if not _has_flag(args, "--auth-type"):
        args = ["--auth-type", "openai", *args]
    if not _has_flag(args, "--model", "-m"):
        args = ["--model", target.model, *args]
    env = {
        "OPENAI_API_KEY": target.key or NO_KEY,
        "OPENAI_BASE_URL": target.v1,
        "OPENAI_MODEL": target.model,
        "QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(_qwen_defaults(target)),
    }
    return args, env


def _qwen_defaults(target: Target) -> Path:
    """Qwen Code's system defaults with the model as an OpenAI provider: its context window (else
    Qwen Code assumes 200k tokens for a model it does not know, and compacts after cllm would have
    cut the prompt) and whether it sees; written beside its settings, on top of the defaults the
    system has (:func:`_qwen_system_defaults`) so that none are lost."""
    given = os.environ.get("QWEN_CODE_SYSTEM_DEFAULTS_PATH")  # cllm's own file, where a launch's exports were kept
    defaults = _json_object(Path(given) if given else _qwen_system_defaults())
    provider = {
        "id": target.model,
        "name": f"{target.model} (cllm)",
        "baseUrl": target.v1,
        "envKey": "OPENAI_API_KEY",
        "generationConfig": {"contextWindowSize": target.context, "modalities": {"image": target.vision}},
    }
    providers = defaults.get("modelProviders")
    providers = providers if isinstance(providers, dict) else {}
    others = [p for p in providers.get("openai") or [] if not (isinstance(p, dict) and p.get("baseUrl") == target.v1)]
    defaults["modelProviders"] = {**providers, "openai": [provider, *others]}
    defaults["model"] = {**_as_object(defaults.get("model")), "name": target.model}
    security = _as_object(defaults.get("security"))
    security["auth"] = {**_as_object(security.get("auth")), "selectedType": "openai", "baseUrl": target.v1}
    defaults["security"] = security
    return QWEN_FILES.write(target.model, defaults)


def _json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; empty where there is none or it cannot be read."""
    try:
        return _as_object(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _as_object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _has_flag(args: Sequence[str], *names: str) -> bool:
    """Whether ``args`` give one of the flags ``names`` (``--flag value`` or ``--flag=value``)."""
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


INTEGRATIONS = {
    i.name: i
    for i in (
        Integration(
            "claude",
            "Claude Code",
            "claude",
            "@anthropic-ai/claude-code",
            _claude,
            fallbacks=(".local/bin/claude", ".claude/local/claude"),
            description="Anthropic's coding tool with subagents",
        ),
        Integration(
            "codex",
            "Codex",
            "codex",
            "@openai/codex",
            _codex,
            description="OpenAI's open-source coding agent",
            launch_files=CODEX_FILES,
        ),
        Integration(
            "copilot",
            "Copilot CLI",
            "copilot",
            "@github/copilot",
            _copilot,
            fallbacks=(".local/bin/copilot",),
            description="GitHub's AI coding agent for the terminal",
            aliases=("copilot-cli",),
        ),
        Integration(
            "droid",
            "Droid",
            "droid",
            "droid",
            _droid,
            fallbacks=(".local/bin/droid",),
            description="Factory's coding agent across terminal and IDEs",
            launch_files=DROID_FILES,
        ),
        Integration(
            "opencode",
            "OpenCode",
            "opencode",
            "opencode-ai",
            _opencode,
            fallbacks=(".opencode/bin/opencode",),
            description="Anomaly's open-source coding agent",
        ),
        Integration(
            "pi",
            "Pi",
            "pi",
            "@earendil-works/pi-coding-agent",
            _pi,
            description="Minimal AI agent toolkit with plugin support",
            node=(22, 19),
            launch_files=PI_FILES,
        ),
        Integration(
            "qwen",
            "Qwen Code",
            "qwen",
            "@qwen-code/qwen-code",
            _qwen,
            fallbacks=(".npm-global/bin/qwen", ".local/bin/qwen"),
            description="Qwen's AI coding agent with tool use",
            launch_files=QWEN_FILES,
        ),
    )
}


def find_integration(name: str) -> Integration | None:
    """The integration ``name`` (or one of its aliases) names, as Ollama's ``LookupIntegration``."""
    return INTEGRATIONS.get(name) or next((i for i in INTEGRATIONS.values() if name in i.aliases), None)


def usage() -> str:
    """The integrations, for ``cllm launch`` with none named."""
    rows = [
        f"  {i.name:<10} {i.title}" + (f" (aliases: {', '.join(i.aliases)})" if i.aliases else "")
        for i in INTEGRATIONS.values()
    ]
    return "\n".join(
        ["Supported integrations:", *rows, "", "Usage: cllm launch INTEGRATION [--model MODEL] [-- ARGS...]"]
    )


def environ_with(env: dict[str, str]) -> dict[str, str]:
    """The caller's environment with the launch's on top."""
    return {**os.environ, **env}
