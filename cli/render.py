"""Text for ``cllm list`` and ``cllm show``, laid out as the ollama CLI prints them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .progress import human_bytes

_ABRIDGED_LINES = 2


def human_time(then: datetime, now: datetime) -> str:
    seconds = (now - then).total_seconds()
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400), ("day", 86400),
                       ("hour", 3600), ("minute", 60), ("second", 1)):  # fmt: skip
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "Less than a second ago"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("    ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def models_table(models: list[dict[str, Any]], now: datetime) -> str:
    rows = [["NAME", "ID", "SIZE", "MODIFIED"]]
    for m in models:
        modified = human_time(datetime.fromisoformat(m["modified_at"]), now)
        rows.append([m["name"], m["digest"][:12], human_bytes(m["size"]), modified])
    return table(rows)


def running_table(models: list[dict[str, Any]], now: datetime) -> str:
    """`cllm ps`: what is loaded, where, and until when."""
    rows = [["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"]]
    for m in models:
        gpu = m.get("size_vram", 0) / m["size"] if m.get("size") else 0
        processor = "100% CPU" if gpu == 0 else f"{round(100 * gpu)}% GPU"
        until = datetime.fromisoformat(m["expires_at"].replace("Z", "+00:00"))
        left = "Forever" if until.year > now.year + 100 else _from_now(until, now)
        rows.append([m["name"], m["digest"][:12], human_bytes(m["size"]), processor, str(m["context_length"]), left])
    return table(rows)


def _from_now(then: datetime, now: datetime) -> str:
    seconds = int((then - now).total_seconds())
    if seconds < 60:
        return "Less than a minute from now"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''} from now"
    hours = minutes // 60
    return f"{hours} hour{'s' if hours != 1 else ''} from now"


def _section(title: str, rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    return [f"  {title}", *("    " + line for line in table(rows).splitlines()), ""]


def show_text(show: dict[str, Any]) -> str:
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
    params = [line.split(None, 1) for line in (show.get("parameters") or "").splitlines() if line.strip()]
    out += _section("Parameters", [[p[0], p[1] if len(p) > 1 else ""] for p in params])
    out += _section("System", [[line] for line in (show.get("system") or "").splitlines()[:_ABRIDGED_LINES]])
    license_lines = [line for line in (show.get("license") or "").splitlines() if line.strip()]
    if len(license_lines) > _ABRIDGED_LINES:
        license_lines = [*license_lines[:_ABRIDGED_LINES], "..."]
    out += _section("License", [[line] for line in license_lines])
    return "\n".join(out)
