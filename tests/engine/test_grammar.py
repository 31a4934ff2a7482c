"""Grammars that would crash llama.cpp's parser are refused, and a crash in the check stays in a child."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cllm_ollama.engine.grammar import (
    MAX_NESTING,
    GrammarChecker,
    GrammarRejected,
    hoist_refs,
    json_schema_grammar,
    nesting_depth,
)
from cllm_ollama.errors import InvalidRequest


def nested(depth: int) -> str:
    return 'root ::= "\\"" ' + '("a" ' * depth + ")?" * depth + ' "\\""'


def test_nesting_depth_skips_literals_classes_and_comments() -> None:
    assert nesting_depth('root ::= "(((" [()] # (((\n x ::= ("a" ("b"))') == 2
    assert nesting_depth(r'root ::= "\"(" ("a")') == 1
    assert nesting_depth(nested(7)) == 7


def test_too_deep_is_refused_without_asking_llama_cpp() -> None:
    checker = GrammarChecker()
    with pytest.raises(GrammarRejected, match="too deeply nested"):
        asyncio.run(checker.check(nested(MAX_NESTING + 1)))
    assert not checker.started  # refused before any child was started


@pytest.mark.model
def test_a_crash_in_llama_cpp_kills_the_child_not_us() -> None:
    """With the bound lifted, a grammar that overflows the parser's stack kills the checking
    child: the grammar is refused, and the next check runs in a fresh child."""
    checker = GrammarChecker(max_nesting=10**6)

    async def run() -> None:
        await checker.check(nested(10))  # fine
        with pytest.raises(GrammarRejected, match=r"llama\.cpp refused it"):
            await checker.check(nested(200_000))  # SIGSEGV in the child
        await checker.check(nested(11))  # a new child
        with pytest.raises(GrammarRejected):
            await checker.check("root ::= broken (")  # a plain parse error, cached
        with pytest.raises(GrammarRejected):
            await checker.check("root ::= broken (")

    try:
        asyncio.run(run())
    finally:
        checker.close()


def branching(depth: int) -> str:
    """A grammar of ~40 bytes a level whose parse llama.cpp tracks as 2**depth stacks."""
    rules = [f'r{k} ::= r{k + 1} "a" | r{k + 1} "b"' for k in range(depth)]
    return "\n".join(["root ::= r0", *rules, f'r{depth} ::= "c"'])


@pytest.mark.model
def test_a_grammar_too_slow_to_parse_is_refused_and_its_check_killed() -> None:
    """A small grammar whose alternatives multiply: one that parses past the bound is refused as too
    complex (it would cost as much on every token), and one that would parse for minutes is killed
    with its child, so the next check is answered at once by a new one."""
    checker = GrammarChecker(slow_parse_s=0.1, timeout_s=2.0)

    async def run() -> None:
        await checker.check(branching(4))  # microseconds
        with pytest.raises(GrammarRejected, match="too complex"):
            await checker.check(branching(14))  # ~0.8 s here, 0.1 s allowed
        with pytest.raises(GrammarRejected, match="too complex"):
            await checker.check(branching(19), what="grammar")  # ~15 minutes: killed at 2 s
        await checker.check(branching(5))  # a fresh child
        with pytest.raises(GrammarRejected, match="too complex"):
            await checker.check(branching(19))  # remembered: no second wait

    try:
        asyncio.run(run())
    finally:
        checker.close()


# What Pydantic's ``model_json_schema()`` gives for a self-referencing model (a tree node with
# children): the root a ref beside the definitions.
TREE_NODE: dict[str, Any] = {
    "$defs": {
        "Node": {
            "type": "object",
            "title": "Node",
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "title": "Children"},
            },
            "required": ["name", "children"],
        }
    },
    "$ref": "#/$defs/Node",
}
# A definition named as a property of the root, as the converter names that property's rule.
NAMESAKE: dict[str, Any] = {
    "type": "object",
    "properties": {"Addr": {"enum": [1, 2]}, "home": {"$ref": "#/definitions/Addr"}},
    "required": ["Addr", "home"],
    "definitions": {"Addr": {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"]}},
}


@pytest.mark.parametrize("schema", [TREE_NODE, NAMESAKE], ids=["recursive root", "namesake"])
def test_a_format_with_refs_lets_a_model_write_json_of_that_schema(schema: dict[str, Any]) -> None:
    pytest.importorskip("llama_cpp")
    import jsonschema
    from gbnf_sample import Sampler

    grammar = json_schema_grammar(json.dumps(schema))
    texts = [Sampler(grammar, seed).text() for seed in range(40)]
    for text in texts:
        jsonschema.validate(json.loads(text), schema)
    if schema is TREE_NODE:
        assert "root ::= def0-Node" in grammar.splitlines()
        assert any('"children":[{' in text.replace(" ", "") for text in texts)  # nodes in nodes


def test_refs_are_hoisted_under_names_of_their_own() -> None:
    hoisted = hoist_refs(TREE_NODE, "p", "format")
    node = {"$ref": "#/$defs/p0-Node"}
    assert hoisted.schema == node  # the definitions, reached through the refs, are no longer inline
    assert hoisted.defs["p0-Node"]["properties"]["children"]["items"] == node
    assert hoisted.deref(hoisted.schema) is hoisted.defs["p0-Node"]
    # A pointer anywhere in the schema, its parts escaped as JSON pointers and URIs have them.
    odd = {
        "properties": {"a/b": {"type": "integer"}, "c": {"$ref": "#/properties/a~1b"}, "d": {"$ref": "#/%24defs/x%20y"}}
    }
    hoisted = hoist_refs({**odd, "$defs": {"x y": {"type": "null"}}}, "p", "format")
    assert hoisted.defs == {"p0-a-b": {"type": "integer"}, "p1-x-y": {"type": "null"}}
    with pytest.raises(InvalidRequest, match=r'^invalid JSON schema in format: \$ref "#/\$defs/y" points to nothing$'):
        hoist_refs({"items": {"$ref": "#/$defs/y"}}, "p", "format")


@pytest.mark.model
def test_llama_cpp_parses_the_grammar_of_a_format_with_refs() -> None:
    checker = GrammarChecker()
    try:
        for schema in (TREE_NODE, NAMESAKE):
            asyncio.run(checker.check(json_schema_grammar(json.dumps(schema))))
    finally:
        checker.close()
