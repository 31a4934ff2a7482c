"""The OpenAPI components of the request bodies, generated from the structs that decode them.

msgspec writes each struct's JSON Schema; this shapes it as the document has always read: a field
that is not ``required`` also takes null (Go leaves it unset), ``required`` is the struct's own
list (what the handler refuses to go without, not a decode rule), nested structs are written in
place unless they are components of their own, and Go's int64 range is left unsaid.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .go import GoStruct

Schema = dict[str, Any]
_REF = "#/components/schemas/"
_INT64 = (-(2**63), 2**63 - 1)


def nullable(schema: Schema) -> Schema:
    """``schema`` or null: a Go pointer, slice, map or zero value that JSON null leaves unset."""
    if "type" in schema and isinstance(schema["type"], str):
        return schema | {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def components(named: dict[str, type[GoStruct]]) -> dict[str, Schema]:
    """The schema of each struct in ``named`` under its name in the document; a struct it refers to
    is a ``$ref`` when it is one of ``named`` too (a recursive one must be), else written in place."""
    names = {cls: name for name, cls in named.items()}
    return {name: _Writer(cls, names).struct(cls) for name, cls in named.items()}


class _Writer:
    def __init__(self, root: type[GoStruct], names: dict[type[GoStruct], str]) -> None:
        _, self.defs = msgspec.json.schema_components([root], ref_template=_REF + "{name}")
        self.classes = {cls.__name__: cls for cls in _structs(root)}
        self.names = names

    def struct(self, cls: type[GoStruct]) -> Schema:
        schema = self.defs[cls.__name__]
        properties = {}
        for name, prop in schema["properties"].items():
            field = self.field(prop)
            properties[name] = field if name in cls.required else nullable(field)
        out: Schema = {"type": "object", "properties": properties}
        return out | ({"required": list(cls.required)} if cls.required else {})

    def field(self, prop: Schema) -> Schema:
        """A property's schema without msgspec's null branch, default and title: ``struct`` decides
        on null. What ``doc`` put on the whole ``X | None`` is merged into ``X``."""
        prop = {k: v for k, v in prop.items() if k not in ("default", "title")}
        branches = prop.get("anyOf")
        if isinstance(branches, list) and {"type": "null"} in branches:
            rest = [b for b in branches if b != {"type": "null"}]
            del prop["anyOf"]
            prop = (self.schema(rest[0]) if len(rest) == 1 else {"anyOf": rest}) | prop
        return self.schema(prop)

    def schema(self, schema: Schema) -> Schema:
        ref = schema.get("$ref")
        cls = self.classes.get(ref.removeprefix(_REF)) if isinstance(ref, str) else None
        if cls is not None:  # else a component written by hand (Options)
            if cls in self.names:
                return {"$ref": _REF + self.names[cls]}
            return self.struct(cls)
        out = {k: v for k, v in schema.items() if not (k in ("minimum", "maximum") and v in _INT64)}
        if isinstance(out.get("items"), dict):
            out["items"] = self.schema(out["items"])
        if isinstance(out.get("anyOf"), list):  # a union of shapes (a string or blocks)
            out["anyOf"] = [self.schema(branch) for branch in out["anyOf"]]
        return out


def _structs(root: type[GoStruct]) -> list[type[GoStruct]]:
    """Every struct ``root`` reaches (itself included), once."""
    seen: list[type[GoStruct]] = []

    def walk(info: msgspec.inspect.Type) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls in seen:
                return
            seen.append(info.cls)  # type: ignore[arg-type]  # the document's bodies are GoStructs
            for field in info.fields:
                walk(field.type)
        for attr in ("item_type", "value_type", "types"):
            value = getattr(info, attr, None)
            for sub in value if isinstance(value, tuple) else [value] if value is not None else []:
                walk(sub)
        if isinstance(info, msgspec.inspect.Metadata):
            walk(info.type)

    walk(msgspec.inspect.type_info(root))
    return seen
