"""Random texts a GBNF grammar accepts, for tests that check what reads a grammar's output back
(each family's output parser reading a forced call): llama.cpp can say whether a grammar parses,
not what text it lets a model write.

Covers the GBNF that ``call_grammar`` and llama.cpp's JSON Schema converter write: literals, char
classes (negated, ranges, escapes), rule references, groups, ``|``, ``*``, ``+``, ``?``, ``{m,n}``.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field

# Characters tried for a char class: plain ones and those a family's marks are made of.
_PROBES = "aZ09 _-.,:;=/\\\"'<>|{}[]()\né\t!?e"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "]": "]", "[": "[", "-": "-", "^": "^", "/": "/"}


@dataclass
class _Node:
    kind: str  # lit | cls | ref | seq | alt | rep
    text: str = ""
    chars: tuple[bool, list[tuple[str, str]]] = (False, [])  # negated, ranges
    items: list[_Node] = field(default_factory=list)
    lo: int = 0
    hi: int | None = None


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def space(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t\n":
            self.i += 1

    def char(self) -> str:
        c = self.text[self.i]
        self.i += 1
        if c != "\\":
            return c
        e = self.text[self.i]
        self.i += 1
        if e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            code = int(self.text[self.i : self.i + width], 16)
            self.i += width
            return chr(code)
        return _ESCAPES[e]

    def alternatives(self) -> _Node:
        options = [self.sequence()]
        while self.i < len(self.text) and self.text[self.i] == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else _Node("alt", items=options)

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while True:
            self.space()
            if self.i >= len(self.text) or self.text[self.i] in "|)":
                return _Node("seq", items=items)
            items.append(self.postfix(self.atom()))

    def atom(self) -> _Node:
        c = self.text[self.i]
        if c == '"':
            self.i += 1
            out = []
            while self.text[self.i] != '"':
                out.append(self.char())
            self.i += 1
            return _Node("lit", "".join(out))
        if c == "[":
            self.i += 1
            negated = self.text[self.i] == "^"
            self.i += negated
            ranges: list[tuple[str, str]] = []
            while self.text[self.i] != "]":
                first = self.char()
                last = first
                if self.text[self.i] == "-" and self.text[self.i + 1] != "]":
                    self.i += 1
                    last = self.char()
                ranges.append((first, last))
            self.i += 1
            return _Node("cls", chars=(negated, ranges))
        if c == "(":
            self.i += 1
            inner = self.alternatives()
            self.space()
            self.i += 1  # ")"
            return inner
        name = re.match(r"[A-Za-z0-9-]+", self.text[self.i :])
        assert name, self.text[self.i : self.i + 20]
        self.i += len(name.group())
        return _Node("ref", name.group())

    def postfix(self, node: _Node) -> _Node:
        if self.i >= len(self.text):
            return node
        c = self.text[self.i]
        if c in "*+?":
            self.i += 1
            return _Node("rep", items=[node], lo=1 if c == "+" else 0, hi=1 if c == "?" else None)
        if c == "{":
            end = self.text.index("}", self.i)
            lo, _, hi = self.text[self.i + 1 : end].partition(",")
            bounded = int(hi) if hi else (None if "," in self.text[self.i : end] else int(lo))
            self.i = end + 1
            return _Node("rep", items=[node], lo=int(lo), hi=bounded)
        return node


def parse_gbnf(grammar: str) -> dict[str, _Node]:
    """The grammar's rules by name (one rule a line; comments and blank lines skipped)."""
    rules = {}
    for line in grammar.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, body = line.partition("::=")
        rules[name.strip()] = _Reader(body.strip()).alternatives()
    return rules


def _in_class(c: str, chars: tuple[bool, list[tuple[str, str]]]) -> bool:
    negated, ranges = chars
    return any(a <= c <= b for a, b in ranges) != negated


def _shortest(node: _Node, short: dict[str, int]) -> int:
    """The length of ``node``'s shortest expansion, given each rule's (``short``) so far."""
    if node.kind == "lit":
        return len(node.text)
    if node.kind == "cls":
        return 1
    if node.kind == "ref":
        return short.get(node.text, 10**6)
    if node.kind == "seq":
        return sum(_shortest(n, short) for n in node.items)
    if node.kind == "alt":
        return min(_shortest(n, short) for n in node.items)
    return node.lo * _shortest(node.items[0], short)


@functools.lru_cache(maxsize=64)
def _prepared(grammar: str) -> tuple[dict[str, _Node], dict[str, int]]:
    """The grammar's rules and each rule's shortest expansion (to a fixed point: lengths only
    fall, so passes stop once one changes nothing); made once per grammar, not per seed."""
    rules = parse_gbnf(grammar)
    short: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, node in rules.items():
            length = _shortest(node, short)
            if short.get(name) != length:
                short[name], changed = length, True
    return rules, short


class Sampler:
    """Random texts of a grammar; past ``depth`` nested rules it takes the shortest way out."""

    def __init__(self, grammar: str, seed: int, depth: int = 12) -> None:
        self.rules, self._short = _prepared(grammar)
        self.rng, self.depth = random.Random(seed), depth

    def _min(self, node: _Node) -> int:
        return _shortest(node, self._short)

    def text(self) -> str:
        out: list[str] = []
        self._emit(self.rules["root"], 0, out)
        return "".join(out)

    def _emit(self, node: _Node, level: int, out: list[str]) -> None:
        deep = level > self.depth
        if node.kind == "lit":
            out.append(node.text)
        elif node.kind == "cls":
            choices = [c for c in _PROBES if _in_class(c, node.chars)]
            out.append(self.rng.choice(choices or [chr(c) for c in range(32, 127) if _in_class(chr(c), node.chars)]))
        elif node.kind == "ref":
            self._emit(self.rules[node.text], level + 1, out)
        elif node.kind == "seq":
            for item in node.items:
                self._emit(item, level, out)
        elif node.kind == "alt":
            pick = min(node.items, key=self._min) if deep else self.rng.choice(node.items)
            self._emit(pick, level, out)
        else:
            top = node.hi if node.hi is not None else node.lo + 3
            count = node.lo if deep else self.rng.randint(node.lo, min(top, node.lo + 3))
            for _ in range(count):
                self._emit(node.items[0], level + 1, out)
