"""Typed request bodies, decoded as Go's ``encoding/json`` would decode them, and its error strings.

Each request is a ``msgspec.Struct`` whose fields say their Go type (``go("[]api.Message")``).
Go is lenient where a strict schema is not, so the types are too: unknown fields are ignored,
null is absent (every field is ``X | None``), numbers go into float fields, and what Go decodes
with its own code (``keep_alive``, ``think``, ``format``, ``options``) stays raw (``Any``) for the
handler. A validation error is translated back into Go's message by ``translate``, which each
dialect's decode seam (``ollama.errors.decode``...) calls around ``decode``; where Go has ``any``
and Ollama checks the shape by hand (a message's content parts, Responses input items), the
type says Ollama's message (``refuse``) and ``translate`` gives it instead.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar, Union

import msgspec

from ...errors import InvalidRequest

T = TypeVar("T", bound="GoStruct")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_I64 = 2**63
Refusal = tuple[str, bool]  # ``refuse``'s message, and whether it covers what is inside too
_GO_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}
_GO_INTS = ("int", "int32", "int64")
_GO_ANY_TYPES = {bool: "bool", str: "string", list: "[]interface {}", dict: "map[string]interface {}"}


def go_type(value: object) -> str:
    """How Go's JSON decoder names a value's type in its errors ("string", "number", "array"...)."""
    return _GO_TYPES.get(type(value), "value")


def go_any_type(value: object) -> str:
    """Go's ``%T`` of a JSON value decoded into an ``any``: what Ollama's hand checks print."""
    if value is None:
        return "<nil>"
    return _GO_ANY_TYPES.get(type(value), "float64")


def decode_error(value: object, field: str, target: str) -> InvalidRequest:
    """Go's JSON decode error for ``value`` in the struct field ``field`` of Go type ``target``.

    ``field`` is what Go prints: the innermost struct, then the path from the request's root
    (``ChatRequest.messages.content``). A number an integer field cannot hold is quoted, as Go does.
    """
    got = go_type(value)
    if got == "number" and target in _GO_INTS:
        got = f"number {value}"
    return InvalidRequest(f"json: cannot unmarshal {got} into Go struct field {field} of type {target}")


def go(name: str, **schema: Any) -> msgspec.Meta:
    """A field's Go type as Go's decode errors name it (``"[]api.Message"``). ``schema`` holds msgspec
    constraints, which the decode enforces (Go's int64 range) and the document shows."""
    return msgspec.Meta(extra={"go": name}, **schema)


def refuse(message: str, *, within: bool = False, **schema: Any) -> msgspec.Meta:
    """A part Ollama checks by hand after Go's decode (``any`` there), with a message of its own: a
    wrong shape at it (``within``: or anywhere inside it) is ``message``, not Go's decode error,
    its ``%T`` the value's Go type as Ollama prints it (``go_any_type``). The innermost such part
    on the error's path says it. ``schema``: as ``doc``."""
    return msgspec.Meta(extra={"refuse": (message, within)}, extra_json_schema=schema or None)


def doc(**schema: Any) -> msgspec.Meta:
    """What the OpenAPI document says of a field beyond its type (``description``, ``enum``,
    ``minItems``...), put on the whole ``X | None`` so that decoding is not constrained by it:
    Ollama checks those values after the decode, with messages of its own."""
    return msgspec.Meta(extra_json_schema=schema)


class GoStruct(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A request (or part of one) as Go declares it.

    ``go_name`` is the struct Go names in its errors; a part without one is named by the struct
    around it (a type decoding itself, as api.Message does, makes Go name the path from the
    request). ``go_where`` replaces the whole prefix where a dialect's own decoder names it so.
    ``go_type`` names the struct as an item of an array (``api.Message``). ``required`` is
    what the handler refuses to go without (the OpenAPI document's ``required``: a missing one is
    the handler's 400 or 404, not a decode error).
    """

    go_name: ClassVar[str | None] = None
    go_where: ClassVar[str | None] = None
    go_type: ClassVar[str] = "object"
    go_package: ClassVar[str] = ""  # where set, a named struct's go_type is ``package.Name``
    required: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.go_package and "go_name" in cls.__dict__ and "go_type" not in cls.__dict__:
            cls.go_type = f"{cls.go_package}.{cls.go_name}"


def go_value_type(cls: type[GoStruct]) -> str:
    """How Go names the struct a whole body decodes into (``api.ChatRequest``,
    ``openai.ChatCompletionRequest``), in its words for a body that is no JSON object."""
    if cls.go_type != "object":
        return cls.go_type
    return f"{cls.go_package or 'api'}.{cls.go_name or cls.__name__}"


# The field types Go's scalars decode to; None is Go's zero value, left for the handler to read.
String = Annotated[str, go("string")] | None
Bool = Annotated[bool, go("bool")] | None
GoInt = Annotated[int, go("int", ge=-_I64, le=_I64 - 1)]  # Go's int: 64 bits here
Int = GoInt | None
Float64 = Annotated[float, go("float64")] | None


def go_field_names(body: dict[str, Any], cls: type[GoStruct]) -> dict[str, Any]:
    """``body`` with its keys spelled as ``cls`` names its fields, matched as Go's decoder matches
    them: the exact name, else the same name in other case (a .NET client's ``"Model"``,
    ``"Stream"``), the last key for a field winning; so too inside the structs within (messages,
    their tool calls, tools). Keys that name no field stay as they are, ignored as Go ignores
    them, and so do the keys of what Go decodes as a map (``options``, a call's arguments)."""
    fields = _fields(cls)
    out: dict[str, Any] | None = None
    for key, value in body.items():
        name = key if key in fields.inner else fields.folded.get(key.lower(), key)
        inner = fields.inner.get(name)
        folded = _fold_value(value, inner) if inner is not None else value
        if out is None and (name != key or folded is not value):
            out = {}
            for done, v in body.items():  # what came before, as it was
                if done == key:
                    break
                out[done] = v
        if out is not None:
            out.pop(name, None)  # the last key for a field wins, where Go decodes it again
            out[name] = folded
    return body if out is None else out


@dataclass(frozen=True)
class _Fields:
    """A struct's field names (as JSON spells them), each with the struct its value (or its
    list's items) decodes into, if any; and each name in lower case to the name."""

    inner: dict[str, type[GoStruct] | None]
    folded: dict[str, str]


@functools.cache
def _fields(cls: type[GoStruct]) -> _Fields:
    inner: dict[str, type[GoStruct] | None] = {}
    for info in msgspec.structs.fields(cls):
        hint, _, _ = _unwrap(_hints(cls).get(info.name, Any))
        if typing.get_origin(hint) is list:
            hint, _, _ = _item(hint)
        inner[info.encode_name] = hint if isinstance(hint, type) and issubclass(hint, GoStruct) else None
    return _Fields(inner, {name.lower(): name for name in reversed(list(inner))})  # the first wins a tie


def _fold_value(value: Any, struct: type[GoStruct]) -> Any:
    if isinstance(value, dict):
        return go_field_names(value, struct)
    if isinstance(value, list):
        items = [go_field_names(v, struct) if isinstance(v, dict) else v for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def decode(body: dict[str, Any], cls: type[T]) -> T:
    """``body`` (a JSON object, parsed already) as ``cls``, or Go's decode error (400)."""
    try:
        return msgspec.convert(body, cls)
    except msgspec.ValidationError as exc:
        raise translate(exc, body, cls) from None


def translate(exc: msgspec.ValidationError, body: object, cls: type[GoStruct]) -> InvalidRequest:
    """msgspec's ``Expected `str`, got `int` - at `$.messages[0].content``` as Go words it:
    ``json: cannot unmarshal number into Go struct field ChatRequest.messages.content of type string``.

    The path is walked through ``cls``'s fields (for the Go names) and through ``body`` (for the
    value Go prints: ``number 1.5`` where an int was wanted).
    """
    message = str(exc)
    path = message.rsplit(" - at `", 1)[1].rstrip("`") if " - at `" in message else "$"
    segments = _SEGMENT.findall(path[1:])
    if not segments:
        return InvalidRequest(f"json: cannot unmarshal {go_type(body)} into Go value of type {go_value_type(cls)}")
    named, fields = cls.go_where or cls.go_name or cls.__name__, list[str]()
    struct: type[GoStruct] = cls
    value: Any = body
    current: Any = cls
    where, target, refusal, refused_value = named, "object", None, None
    for step, (name, index) in enumerate(segments, 1):
        if name:
            current, target, refused = _field(struct, name)
            fields.append(name)
            where = f"{named}.{'.'.join(fields)}"
            value = value.get(name) if isinstance(value, dict) else None
        else:
            current, target, refused = _item(current)
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
        if refused is not None and (refused[1] or step == len(segments)):
            refusal, refused_value = refused[0], value
        if isinstance(current, type) and issubclass(current, GoStruct):
            struct = current
            if current.go_where:
                named, fields = current.go_where, []
            elif current.go_name:
                named = current.go_name
    if refusal is not None:
        return InvalidRequest(refusal.replace("%T", go_any_type(refused_value)))
    return decode_error(value, where, target)


@functools.cache
def _hints(cls: type[GoStruct]) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _field(struct: type[GoStruct], name: str) -> tuple[Any, str, Refusal | None]:
    """The type (None and Annotated taken off), Go type name and refusal (``refuse``) of
    ``struct``'s field ``name``."""
    hint = _hints(struct).get(name, Any)
    return _unwrap(hint)


def _item(container: Any) -> tuple[Any, str, Refusal | None]:
    """The item type of a list type (or of the list in a union: a string or parts), as ``_field``."""
    if typing.get_origin(container) in (Union, types.UnionType):
        bare = [typing.get_args(a)[0] if typing.get_origin(a) is Annotated else a for a in typing.get_args(container)]
        container = next((arg for arg in bare if typing.get_origin(arg) is list), Any)
    args = typing.get_args(container)
    return _unwrap(args[0] if args else Any)


def _unwrap(hint: Any) -> tuple[Any, str, Refusal | None]:
    target, refusal = "object", None
    for _ in range(2):  # Annotated[X | None, ...] or Annotated[X, ...] | None
        if typing.get_origin(hint) in (Union, types.UnionType):
            rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
            hint = rest[0] if len(rest) == 1 else hint
        if typing.get_origin(hint) is Annotated:
            hint, *metas = typing.get_args(hint)
            for meta in metas:
                if isinstance(meta, msgspec.Meta) and meta.extra:
                    target = meta.extra.get("go", target)
                    refusal = meta.extra.get("refuse", refusal)
    if isinstance(hint, type) and issubclass(hint, GoStruct) and target == "object":
        target = hint.go_type
    return hint, target, refusal
