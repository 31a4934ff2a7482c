"""Text for ``cllm list`` and ``cllm show``, laid out as the ollama CLI prints them."""

from __future__ import annotations

import math
import unicodedata
from datetime import datetime
from typing import Any

import click

from cllm_ollama.chatformat.gotemplate.values import go_print, type_name
from cllm_ollama.store.gguf_info import human_number

from .progress import human_bytes

_ABRIDGED_LINES = 2


def human_time(then: datetime, now: datetime) -> str:
    """Go ollama's format.HumanTime: how long ago (or from now) ``then`` is, as ``ollama list`` says it."""
    seconds = (now - then).total_seconds()
    if int(int(seconds / 3600) / 24 / 365) < -20:
        return "Forever"
    if seconds < 0:
        return f"{_human_duration(-seconds)} from now"
    return f"{_human_duration(seconds)} ago"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("    ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def models_table(models: list[dict[str, Any]], now: datetime) -> str:
    """`cllm list`: Ollama's columns, a broken model marked in its row (``broken_notes`` say why)."""
    rows = [["NAME", "ID", "SIZE", "MODIFIED"]]
    for m in models:
        modified = human_time(datetime.fromisoformat(m["modified_at"]), now)
        name = f"{m['name']} (broken)" if m.get("broken") else m["name"]
        rows.append([name, m["digest"][:12], human_bytes(m["size"]), modified])
    return table(rows)


def broken_notes(models: list[dict[str, Any]]) -> list[str]:
    """Why each broken model is (for stderr: scripts read the table's rows, one model each)."""
    return [m["broken"] for m in models if m.get("broken")]


def echo_models(models: list[dict[str, Any]], now: datetime) -> None:
    """The models' table on stdout, and why any is broken on stderr."""
    click.echo(models_table(models, now))
    for note in broken_notes(models):
        click.echo(note, err=True)


def running_table(models: list[dict[str, Any]], now: datetime) -> str:
    """`cllm ps`: what is loaded, where, and until when, in Ollama's columns and words; then
    cllm's own: requests in slots out of the slots (RUNNING), and requests waiting (QUEUED)."""
    rows = [["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL", "RUNNING", "QUEUED"]]
    for m in models:
        size, vram = m.get("size", 0), m.get("size_vram", 0)
        if vram == 0:
            processor = "100% CPU"
        elif vram == size:
            processor = "100% GPU"
        elif vram > size or size == 0:
            processor = "Unknown"
        else:
            cpu = round((size - vram) / size * 100)
            processor = f"{cpu}%/{100 - cpu}% CPU/GPU"
        until = datetime.fromisoformat(m["expires_at"].replace("Z", "+00:00"))
        if until < now:
            left = "Stopping..."
        elif until.year > now.year + 100:
            left = "Forever"
        else:
            left = f"{_human_duration((until - now).total_seconds())} from now"
        running = f"{m.get('requests_running', 0)}/{m.get('num_parallel', 0)}"
        queued = str(m.get("requests_queued", 0))
        rows.append(
            [m["name"], m["digest"][:12], human_bytes(size), processor, str(m["context_length"]), left, running, queued]
        )
    return table(rows)


def _human_duration(seconds: float) -> str:
    """Go ollama's format.humanDuration."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    minutes = s // 60
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = math.floor(seconds / 3600 + 0.5)  # Go's math.Round of the hours
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    if hours < 24 * 7 * 2:
        return f"{hours // 24} days"
    if hours < 24 * 30 * 2:
        return f"{hours // 24 // 7} weeks"
    if hours < 24 * 365 * 2:
        return f"{hours // 24 // 30} months"
    return f"{int(seconds // 3600) // 24 // 365} years"


def _section(title: str, rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    return [f"  {title}", *("    " + line for line in table(rows).splitlines()), ""]


def _projector_rows(info: dict[str, Any]) -> list[list[str]]:
    """Ollama's Projector section: a vision or audio tower's architecture, size and widths."""
    arch = info.get("general.architecture") or ""

    def value(suffix: str) -> Any:
        found = (info.get(f"{arch}.{modality}.{suffix}") for modality in ("vision", "audio"))
        return next((v for v in found if isinstance(v, int | float)), None)

    count = info.get("general.parameter_count")
    facts = [
        ("architecture", arch or None),
        ("parameters", human_number(int(count)) if isinstance(count, int | float) else None),
        ("embedding length", value("embedding_length")),
        ("dimensions", value("projection_dim")),
    ]
    return [[k, str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)] for k, v in facts if v is not None]


def show_text(show: dict[str, Any], verbose: bool = False) -> str:
    """The default ``show`` view: model facts, capabilities, parameters, system, license (abridged)."""
    info = show.get("model_info") or {}
    details = show.get("details") or {}
    arch = info.get("general.architecture", details.get("family", ""))
    facts = [
        ("architecture", arch),
        ("parameters", details.get("parameter_size")),
        ("context length", info.get(f"{arch}.context_length")),
        ("embedding length", info.get(f"{arch}.embedding_length")),
        ("quantization", details.get("quantization_level")),
    ]
    out = ["", *_section("Model", [[k, str(v)] for k, v in facts if v not in (None, "")])]
    out += _section("Capabilities", [[c] for c in show.get("capabilities") or []])
    out += _section("Projector", _projector_rows(show.get("projector_info") or {}))
    params = [line.split(None, 1) for line in (show.get("parameters") or "").splitlines() if line.strip()]
    out += _section("Parameters", [[p[0], p[1] if len(p) > 1 else ""] for p in params])
    if verbose:
        out += _section("Metadata", [[k, _metadata_value(v)] for k, v in sorted(info.items())])
        tensors = show.get("tensors") or []
        out += _section("Tensors", [[t["name"], t["type"], _go_value(t["shape"])] for t in tensors])
    out += _section("System", _head(show.get("system") or ""))
    out += _section("License", _head(show.get("license") or ""))
    return "\n".join(out)


def _head(text: str) -> list[list[str]]:
    """Ollama's abridged System and License: the first non-blank lines, trimmed, then "..."."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > _ABRIDGED_LINES:
        lines = [*lines[:_ABRIDGED_LINES], "..."]
    return [[line] for line in lines]


def _go_value(value: Any) -> str:
    """Go's ``%v`` of a value JSON decoded into ``any``, where every number is a float64."""
    return go_print(_as_decoded(value))


def _as_decoded(value: Any) -> Any:
    """``value`` as Go's JSON decoder holds it in ``any``: numbers as float64."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_as_decoded(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_decoded(v) for k, v in value.items()}
    return value


def _width(text: str) -> int:
    """Cells a string takes in a terminal (go-runewidth): wide East Asian runes two, marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _metadata_value(value: Any) -> str:
    """A Metadata row's value as ``ollama show -v`` prints it: an array cut to about ten cells,
    with how many more it holds; a value of another kind named by its Go type."""
    if value is None or isinstance(value, dict):
        return type_name(value)  # Go's %T
    if not isinstance(value, list):
        return _go_value(value)
    shown, total = 0, 1
    for i, item in enumerate(value):
        width = _width(_go_value(item)) + (2 if i else 0)
        if total + width > 10 and i > 0:
            break
        total += width
        shown += 1
    if shown < len(value):
        return _go_value(value[:shown])[:-1] + f" ...+{len(value) - shown} more]"
    return _go_value(value)
