"""The architecture's import rules, checked on the source: layers import one way only."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cllm_ollama"


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A source file's tree, parsed once for all the rules below."""
    return ast.parse(path.read_text())


def imports_of(tree: ast.AST | Path, path: Path | None = None) -> set[str]:
    """Absolute module names a file (or one import in it) imports, relative imports resolved
    against the package."""
    if isinstance(tree, Path):
        tree, path = parsed(tree), tree
    assert path is not None
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(parts[: len(parts) - node.level])
                out.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                out.add(node.module)
    return out


def files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("engine", ("cllm_ollama.api", "cllm_ollama.store", "starlette")),
        ("store", ("cllm_ollama.api", "cllm_ollama.engine", "starlette", "llama_cpp")),
        # The layout converter rewrites GGUFs and knows nothing of where they are kept or served.
        (
            "convert",
            ("cllm_ollama.api", "cllm_ollama.engine", "cllm_ollama.store", "cllm_ollama.chatformat", "llama_cpp"),
        ),
        # Above the engine there is no llama.cpp: grammars, samplers and pointers stay below it.
        ("api", ("llama_cpp", "ctypes")),
        # The chat format sits between the dialects and the engine and knows neither HTTP nor llama.cpp:
        # the API hands it the model and a tokenizer; the engine never calls it.
        ("chatformat", ("cllm_ollama.api", "cllm_ollama.engine", "starlette", "llama_cpp", "ctypes")),
    ],
)
def test_layer_does_not_import(layer: str, forbidden: tuple[str, ...]) -> None:
    for path in files(layer):
        bad = {m for m in imports_of(path) if m.startswith(forbidden)}
        assert not bad, f"{path.name} imports {bad}"


def test_the_engine_never_renders_chats() -> None:
    for path in files("engine"):
        bad = {m for m in imports_of(path) if m.startswith("cllm_ollama.chatformat")}
        assert not bad, f"{path.name} imports {bad}"


def test_only_the_binding_touches_llama_cpp_and_ctypes() -> None:
    for path in PACKAGE.rglob("*.py"):
        found = {m for m in imports_of(path) if m.split(".")[0] in ("llama_cpp", "ctypes")}
        name = path.relative_to(PACKAGE).as_posix()
        allowed = {
            "engine/grammar.py": {"llama_cpp.llama_grammar"},  # pure-Python JSON-schema-to-GBNF converter
        }.get(name, found if name.startswith("engine/binding/") else set())  # the ctypes layer itself
        assert found <= allowed, f"{path.relative_to(PACKAGE)} imports {found - allowed}"


def module_graph() -> dict[str, set[str]]:
    """Every cllm_ollama module -> the cllm_ollama modules it imports, function-level imports included
    (``from . import x`` counts as importing the submodule ``x``)."""
    paths = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found = imports_of(path)
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom):
                found |= {f"{module}.{alias.name}" for module in imports_of(node, path) for alias in node.names}
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def test_no_module_imports_itself_through_others() -> None:
    graph = module_graph()
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            assert module != start, f"{start} imports itself through {sorted(seen)}"
            if module not in seen:
                seen.add(module)
                todo += graph[module]


@pytest.mark.parametrize("layer", ["api", "chatformat", "convert", "engine", "store", "testing"])
def test_no_private_name_is_imported_across_modules(layer: str) -> None:
    for path in files(layer):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not private, f"{path.relative_to(PACKAGE)} imports {private}"
