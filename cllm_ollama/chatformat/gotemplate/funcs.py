"""The functions a template may call (Go's ``text/template/funcs.go``), and Ollama's own."""

from __future__ import annotations

import datetime
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from ...gostrconv import go_quote
from .values import NO_VALUE, GoStruct, TemplateError, go_json, go_print, truth, type_name


def _kind(value: Any) -> str:
    if value is None or value is NO_VALUE:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("missing argument for comparison")
    for b in others:
        ka, kb = _kind(a), _kind(b)
        if ka == "other" or kb == "other":
            if isinstance(a, GoStruct) or isinstance(b, GoStruct) or ka == kb:
                raise TemplateError("error calling eq: non-comparable types")
            if "nil" not in (ka, kb):
                raise TemplateError("error calling eq: incompatible types for comparison")
            continue
        if ka != kb:
            if "nil" in (ka, kb):
                continue
            raise TemplateError("error calling eq: incompatible types for comparison")
        if a == b:
            return True
    return False


def _ordered(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    ka, kb = _kind(a), _kind(b)
    if ka not in ("number", "string") or ka != kb:
        raise TemplateError(f"error calling {name}: incompatible types for comparison")
    return a, b


def _len(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list | tuple | dict):
        return len(value)
    raise TemplateError(f"error calling len: len of type {type_name(value)}")


def _index(item: Any, *indexes: Any) -> Any:
    for index in indexes:
        if isinstance(item, dict):
            item = item.get(index)
        elif isinstance(item, list | tuple | str):
            seq = item.encode() if isinstance(item, str) else item
            if not isinstance(index, int) or isinstance(index, bool):
                raise TemplateError(f"error calling index: cannot index slice/array with type {type_name(index)}")
            if not 0 <= index < len(seq):
                raise TemplateError(f"error calling index: index out of range: {index}")
            item = seq[index]
        elif item is None or item is NO_VALUE:
            raise TemplateError("error calling index: index of untyped nil")
        else:
            raise TemplateError(f"error calling index: can't index item of type {type_name(item)}")
    return item


def _slice(item: Any, *indexes: Any) -> Any:
    if len(indexes) > 3:
        raise TemplateError(f"error calling slice: too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise TemplateError("error calling slice: cannot 3-index slice a string")
        seq: Any = item.encode()
    elif isinstance(item, list | tuple):
        seq = item
    else:
        raise TemplateError(f"error calling slice: can't slice item of type {type_name(item)}")
    bounds = [int(i) for i in indexes]
    cap = len(seq)
    low = bounds[0] if bounds else 0
    high = bounds[1] if len(bounds) > 1 else len(seq)
    if not 0 <= low <= high <= cap:
        raise TemplateError(f"error calling slice: index out of range: {high if high > cap else low}")
    out = seq[low:high]
    if isinstance(item, str):
        return out.decode(errors="replace")
    return list(out)


def _sprint(*args: Any) -> str:
    out = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_print(arg))
    return "".join(out)


def _sprintln(*args: Any) -> str:
    return " ".join(go_print(a) for a in args) + "\n"


_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])")


def _sprintf(fmt: str, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise TemplateError("error calling printf: format is not a string")
    values = list(args)
    used = 0

    def verb(m: re.Match[str]) -> str:
        nonlocal used
        flags, width, precision, v = m.groups()
        if v == "%":
            return "%"
        if used >= len(values):
            return f"%!{v}(MISSING)"
        value = values[used]
        used += 1
        if v in "vs":
            text = go_print(value)
        elif v == "q":
            text = go_quote(value) if isinstance(value, str) else go_print(value)
        elif v == "d" and isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        elif v in "feEgG" and isinstance(value, int | float) and not isinstance(value, bool):
            text = f"{value:{'.' + precision if precision else ('.6' if v in 'feE' else '')}{v}}"
        elif v == "t" and isinstance(value, bool):
            text = "true" if value else "false"
        elif v in "xX" and isinstance(value, int | str):
            text = value.encode().hex() if isinstance(value, str) else format(value, "x")
            text = text.upper() if v == "X" else text
        elif v == "c" and isinstance(value, int):
            text = chr(value)
        elif v == "T":
            text = type_name(value)
        else:
            return f"%!{v}({type_name(value)}={go_print(value)})"
        if width:
            text = text.ljust(int(width)) if "-" in flags else text.rjust(int(width), "0" if "0" in flags else " ")
        return text

    out = _VERB.sub(verb, fmt)
    if used < len(values):
        extra = ", ".join(f"{type_name(v)}={go_print(v)}" for v in values[used:])
        out += f"%!(EXTRA {extra})"
    return out


def _html(*args: Any) -> str:
    text = _sprint(*args)
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
        .replace("\0", "\ufffd")
    )


def _js(*args: Any) -> str:
    text = _sprint(*args)
    out = []
    for ch in text:
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif ch in "<>&=" or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _urlquery(*args: Any) -> str:
    return urllib.parse.quote_plus(_sprint(*args))


def _not(value: Any) -> bool:
    return not truth(value)


def _call(*args: Any) -> Any:
    raise TemplateError("error calling call: templates here hold no functions to call")


def _today(offset_days: int) -> str:
    return (datetime.date.today() + datetime.timedelta(days=offset_days)).isoformat()


def _ts_type(json_type: str) -> str:
    return {
        "string": "string",
        "number": "number",
        "integer": "number",
        "boolean": "boolean",
        "array": "any[]",
        "object": "Record<string, any>",
        "null": "null",
    }.get(json_type, "any")


def _to_typescript_type(value: Any = None, *_: Any) -> str:
    """Ollama's ``ToolProperty.ToTypeScriptType``; anything that is not a tool property is ``any``."""
    if not isinstance(value, GoStruct) or value.type_name != "api.ToolProperty":
        return "any"
    any_of = value.fields.get("AnyOf") or []
    if any_of:
        return " | ".join(_to_typescript_type(p) for p in any_of)
    types = value.fields.get("Type") or []
    if not types:
        return "any"
    return " | ".join(_ts_type(t) for t in types)


FUNCS: dict[str, Callable[..., Any]] = {
    "not": _not,
    "len": _len,
    "index": _index,
    "slice": _slice,
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "lt": lambda a, b: (lambda x, y: x < y)(*_ordered("lt", a, b)),
    "le": lambda a, b: (lambda x, y: x <= y)(*_ordered("le", a, b)),
    "gt": lambda a, b: (lambda x, y: x > y)(*_ordered("gt", a, b)),
    "ge": lambda a, b: (lambda x, y: x >= y)(*_ordered("ge", a, b)),
    "print": _sprint,
    "printf": _sprintf,
    "println": _sprintln,
    "html": _html,
    "js": _js,
    "urlquery": _urlquery,
    "call": _call,
    "json": lambda v: go_json(v),
    "currentDate": lambda *fmt: _today(0),
    "yesterdayDate": lambda *fmt: _today(-1),
    "toTypeScriptType": _to_typescript_type,
}
