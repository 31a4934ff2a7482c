"""Every field the binding sets on llama.cpp's parameter structs exists in the pinned binding.

A ctypes ``Structure`` takes any attribute: a field llama.cpp renamed or removed (``use_mmap``
became ``load_mode``) is then set on the Python object alone, and the setting is silently lost.
"""

from __future__ import annotations

import ast
import ctypes
from pathlib import Path

import llama_cpp.llama_cpp as ll
import llama_cpp.mtmd_cpp as mtmd
import pytest

import cllm_ollama.engine.binding as binding

# The function that makes each struct, by name: the struct its result is.
_STRUCTS: dict[str, type[ctypes.Structure]] = {
    "llama_model_default_params": ll.llama_model_params,
    "llama_context_default_params": ll.llama_context_params,
    "llama_model_quantize_default_params": ll.llama_model_quantize_params,
    "mtmd_context_params_default": mtmd.mtmd_context_params,
}
_SOURCES = sorted(Path(binding.__file__).parent.glob("*.py"))


def _fields_set(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(struct maker, field, line) of each ``x.field = ...`` where ``x = maker()`` in the same function."""
    found = []
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        made: dict[str, str] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value.func
                name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
                for target in node.targets:
                    if isinstance(target, ast.Name) and name in _STRUCTS:
                        made[target.id] = name
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    owner = target.value if isinstance(target, ast.Attribute) else None
                    if isinstance(target, ast.Attribute) and isinstance(owner, ast.Name) and owner.id in made:
                        found.append((made[owner.id], target.attr, node.lineno))
    return found


@pytest.mark.parametrize("source", _SOURCES, ids=lambda p: p.name)
def test_each_field_set_on_a_params_struct_is_one_of_its_fields(source: Path) -> None:
    for maker, field, line in _fields_set(ast.parse(source.read_text())):
        names = {f[0] for f in _STRUCTS[maker]._fields_}
        assert field in names, f"{source.name}:{line}: {_STRUCTS[maker].__name__} has no field {field!r}"


def test_the_check_sees_the_binding_set_fields() -> None:
    seen = {(maker, field) for source in _SOURCES for maker, field, _ in _fields_set(ast.parse(source.read_text()))}
    assert ("llama_model_default_params", "load_mode") in seen
    assert ("llama_context_default_params", "type_v") in seen and ("mtmd_context_params_default", "use_gpu") in seen
