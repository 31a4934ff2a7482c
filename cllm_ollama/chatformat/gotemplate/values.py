"""Go's values as templates see them: structs, maps, slices and ``<no value>``, printed and
written as JSON the way Go's ``fmt`` and ``encoding/json`` do, and the truth of each."""

from __future__ import annotations

import decimal
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import CllmError


class TemplateError(CllmError):
    def __init__(self, message: str) -> None:
        super().__init__(f"template: {message}", 500)


class _NoValue:
    """What a missing map key gives (Go prints ``<no value>``); false, and null as JSON."""

    _instance: _NoValue | None = None

    def __new__(cls) -> _NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE = _NoValue()


class GoStruct:
    """A Go struct: fields by Go name; ``json`` is its JSON form (as its json tags write it), and
    ``string`` its ``String()`` method, which is how it prints."""

    __slots__ = ("fields", "json", "string", "type_name")

    def __init__(
        self,
        type_name: str,
        fields: dict[str, Any],
        json: Callable[[], Any] | None = None,
        string: Callable[[], str] | None = None,
    ) -> None:
        self.type_name = type_name
        self.fields = fields
        self.json = json
        self.string = string

    def __repr__(self) -> str:
        return f"GoStruct({self.type_name}, {self.fields!r})"


class GoMap(dict):  # type: ignore[type-arg]
    """A Go map with a ``String()`` method (Ollama's tool arguments and properties print as JSON)."""

    string: Callable[[], str] | None = None


class GoList(list):  # type: ignore[type-arg]
    """A Go slice with a ``String()`` method (Ollama's tools print as JSON)."""

    string: Callable[[], str] | None = None


def type_name(value: Any) -> str:
    if isinstance(value, GoStruct):
        return value.type_name
    if value is None or value is NO_VALUE:
        return "<nil>"
    return {bool: "bool", int: "int", float: "float64", str: "string"}.get(type(value)) or (
        "map[string]interface {}" if isinstance(value, dict) else "[]interface {}"
    )


def go_float(value: float, json: bool = False) -> str:
    """A float64 as Go writes it: ``fmt``'s ``%v`` (shortest digits, exponent form from 1e+06 and
    below 1e-04) or, for JSON, encoding/json's (exponent form from 1e+21 and below 1e-06)."""
    if math.isnan(value) or math.isinf(value):
        if json:
            raise TemplateError(f"json: unsupported value: {go_float(value)}")
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 and not json else "0"
    sign, digit_tuple, exponent = decimal.Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent = int(exponent) + len(digit_tuple) - len(digits)
    point = len(digits) + exponent  # where the decimal point falls, counted from the first digit
    x = point - 1
    minus = "-" if sign else ""
    low, high = (-6, 21) if json else (-4, 6)
    if x < low or x >= high:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp = f"{abs(x):02d}" if not (json and x < 0) else str(abs(x))
        return f"{minus}{mantissa}e{'-' if x < 0 else '+'}{exp}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return minus + digits + "0" * (point - len(digits))
    return f"{minus}{digits[:point]}.{digits[point:]}"


_HTML_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
_SEPARATOR_ESCAPES = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_string(text: str, html: bool = True) -> str:
    """A JSON string as Go's encoding/json writes it: U+2028/9 escaped, and HTML characters unless
    ``html`` is off (an Encoder's ``SetEscapeHTML(false)``). Python's encoder escapes the rest as Go
    1.22 on does (\\b and \\f short, other control characters as lower-case \\u00XX); the
    characters left to escape can only stand inside the string, so they are replaced in its text."""
    out = json.dumps(text, ensure_ascii=False).translate(_SEPARATOR_ESCAPES)
    return out.translate(_HTML_ESCAPES) if html else out


def go_json(value: Any, html: bool = True) -> str:
    """``json.Marshal`` as Go writes it: maps in key order, structs in field order, HTML escaped
    unless ``html`` is off."""
    if isinstance(value, GoStruct):
        if value.json is not None:
            return go_json(value.json(), html)
        return "{" + ",".join(f"{json_string(k, html)}:{go_json(v, html)}" for k, v in value.fields.items()) + "}"
    if value is None or value is NO_VALUE:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value, json=True)
    if isinstance(value, str):
        return json_string(value, html)
    if isinstance(value, Ordered):
        html = html or value.escapes_html
        return "{" + ",".join(f"{json_string(str(k), html)}:{go_json(v, html)}" for k, v in value.items) + "}"
    if isinstance(value, dict):  # a Go map: keys in order
        return "{" + ",".join(f"{json_string(str(k), html)}:{go_json(value[k], html)}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v, html) for v in value) + "]"
    raise TemplateError(f"json: unsupported type: {type_name(value)}")


def as_decoded(value: Any) -> Any:
    """A JSON value as Go holds it once decoded into ``any``: every number a float64 (an integer
    from 1e21 on prints with an exponent, one past 2**53 rounds)."""
    if isinstance(value, bool) or not isinstance(value, int | dict | list | tuple):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: as_decoded(v) for k, v in value.items()}
    return [as_decoded(v) for v in value]


def decoded(value: Any) -> Any:
    """What ``json.Unmarshal`` into ``any`` gives back from ``go_json(value)``: structs as plain
    dicts in their field order, without the fields their ``omitempty`` left out."""
    if isinstance(value, GoStruct):
        return decoded(value.json()) if value.json is not None else {k: decoded(v) for k, v in value.fields.items()}
    if isinstance(value, Ordered):
        return {k: decoded(v) for k, v in value.items}
    if isinstance(value, dict):
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [decoded(v) for v in value]
    return value


# A JSON string (its escapes included), or a separator outside one.
_JSON_STRING_OR_SEPARATOR = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[:,]')


def with_spaces(text: str) -> str:
    """JSON with a space after every ``:`` and ``,`` outside strings: Ollama's ``marshalWithSpaces``
    (``model/renderers/json.go``), which its renderers use where the model's template has Python's
    ``json.dumps``."""
    return _JSON_STRING_OR_SEPARATOR.sub(lambda m: m[0] if m[0][0] == '"' else m[0] + " ", text)


@dataclass
class Ordered:
    """A JSON object whose keys keep their order (a struct's json form)."""

    items: list[tuple[str, Any]]
    # Marshalled by a library that escapes HTML whatever the encoder says (api.ToolPropertiesMap,
    # through wk8/go-ordered-map and easyjson): <, > and & escaped within, even for LFM2's encoder.
    escapes_html: bool = False


def struct_json(*pairs: tuple[str, Any, bool]) -> Ordered:
    """A struct's JSON: (json name, value, omitempty) in field order."""
    return Ordered([(k, v) for k, v, omit in pairs if not (omit and _empty(v))])


def _empty(value: Any) -> bool:
    """Go's omitempty: false, 0, nil and empty strings, slices and maps are left out."""
    if value is None or value is NO_VALUE:
        return True
    if isinstance(value, bool | int | float):
        return not value
    if isinstance(value, str | list | tuple | dict):
        return len(value) == 0
    return False


def go_print(value: Any) -> str:
    """A value as Go's ``fmt.Print`` writes it (how ``{{ . }}`` prints)."""
    if isinstance(value, GoStruct):
        if value.string is not None:
            return value.string()
        return "{" + " ".join(go_print(v) for v in value.fields.values()) + "}"
    if isinstance(value, GoMap | GoList) and value.string is not None:
        return value.string()
    if value is NO_VALUE:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{go_print(k)}:{go_print(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    return str(value)


def truth(value: Any) -> bool:
    """Go's truth: false, 0, nil and empty strings, slices and maps are false; structs are true."""
    if isinstance(value, GoStruct):
        return True
    return bool(value)
