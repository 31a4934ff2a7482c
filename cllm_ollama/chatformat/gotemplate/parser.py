"""The parse tree and the parser (Go's ``text/template/parse``), with the nesting bounded at parse time."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from .lexer import MAX_DEPTH, Item, lex
from .values import TemplateError, go_print


@dataclass
class Text:
    text: str


@dataclass
class Field:
    idents: list[str]


@dataclass
class Variable:
    idents: list[str]  # ["$x", "A", "B"] for $x.A.B


@dataclass
class Dot:
    pass


@dataclass
class Literal:
    value: Any


@dataclass
class Identifier:
    name: str


@dataclass
class Chain:
    node: Any
    fields: list[str]


@dataclass
class Command:
    args: list[Any]


@dataclass
class Pipe:
    decl: list[str] = field(default_factory=list)
    is_assign: bool = False
    cmds: list[Command] = field(default_factory=list)


@dataclass
class Action:
    pipe: Pipe


@dataclass
class Branch:
    kind: str  # if | range | with
    pipe: Pipe
    body: list[Any]
    orelse: list[Any] | None = None


@dataclass
class TemplateCall:
    name: str
    pipe: Pipe | None


@dataclass
class Loop:
    kind: str  # break | continue


_FUNCTION_NAMES = {
    "and",
    "or",
    "not",
    "len",
    "index",
    "slice",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "print",
    "printf",
    "println",
    "html",
    "js",
    "urlquery",
    "call",
    "json",
    "currentDate",
    "yesterdayDate",
    "toTypeScriptType",
}


class _Parser:
    def __init__(self, src: str) -> None:
        self.items = lex(src)
        self.pos = 0
        self.defines: dict[str, list[Any]] = {}
        self.vars: list[str] = ["$"]
        self.depth = 0
        self.range_depth = 0

    # item access
    def peek(self) -> Item:
        return self.items[self.pos]

    def next(self) -> Item:
        item = self.items[self.pos]
        self.pos += 1
        return item

    def peek_non_space(self) -> Item:
        while self.items[self.pos].kind == "space":
            self.pos += 1
        return self.items[self.pos]

    def next_non_space(self) -> Item:
        self.peek_non_space()
        return self.next()

    def error(self, item: Item, message: str) -> TemplateError:
        return TemplateError(f":{item.line}: {message}")

    def expect(self, kind: str, context: str) -> Item:
        item = self.next_non_space()
        if item.kind != kind:
            raise self.error(item, f"unexpected {self._describe(item)} in {context}")
        return item

    @staticmethod
    def _describe(item: Item) -> str:
        if item.kind == "right":
            return '"}}"'
        if item.kind == "eof":
            return "EOF"
        if item.kind in ("field", "var", "ident", "keyword"):
            return f"<{'.' if item.kind == 'field' else ''}{item.value}>"
        return repr(item.value) if item.value is not None else repr(item.kind)

    # the tree
    def parse(self) -> list[Any]:
        nodes, end = self.list_until(top=True)
        if end is not None:
            raise self.error(end[1], f"unexpected {{{{{end[0]}}}}}")
        return nodes

    def list_until(self, top: bool = False) -> tuple[list[Any], tuple[str, Item] | None]:
        """Nodes up to an ``{{end}}``/``{{else ...}}`` (returned with it) or, at the top, EOF."""
        nodes: list[Any] = []
        while True:
            item = self.next()
            if item.kind == "eof":
                if not top:
                    raise self.error(item, "unexpected EOF: missing {{end}}")
                return nodes, None
            if item.kind == "text":
                nodes.append(Text(item.value))
                continue
            assert item.kind == "left"
            head = self.peek_non_space()
            if head.kind == "keyword":
                self.next()
                word = head.value
                if word in ("end", "else"):
                    return nodes, (word, head)
                node = self.control(word, head, top)
                if node is not None:
                    nodes.append(node)
                continue
            nodes.append(Action(self.pipeline("command")))

    def control(self, word: str, item: Item, top: bool) -> Any:
        if word in ("if", "with", "range"):
            return self.branch(word, item)
        if word in ("break", "continue"):
            if self.range_depth == 0:
                raise self.error(item, f"{{{{{word}}}}} outside {{{{range}}}}")
            self.expect("right", word)
            return Loop(word)
        if word == "template":
            name = self.expect("string", "template clause").value
            pipe = None
            if self.peek_non_space().kind != "right":
                pipe = self.pipeline("template clause")
            else:
                self.next()
            return TemplateCall(name, pipe)
        if word in ("define", "block"):
            if word == "define" and not top:
                raise self.error(item, "unexpected <define> in command")
            name = self.expect("string", f"{word} clause").value
            pipe = None
            if word == "block":
                pipe = self.pipeline("block clause")
            else:
                self.expect("right", "define clause")
            saved_vars, self.vars = self.vars, ["$"]
            body, end = self.list_until()
            self.vars = saved_vars
            if end is None or end[0] != "end":
                raise self.error(item, f"unexpected {{{{else}}}} in {word}")
            self.expect("right", "end")
            self.defines[name] = body
            return TemplateCall(name, pipe) if word == "block" else None
        raise self.error(item, f"unexpected <{word}>")

    def branch(self, kind: str, item: Item) -> Branch:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TemplateError(f"blocks nested deeper than {MAX_DEPTH}")
        mark = len(self.vars)
        pipe = self.pipeline(kind)
        if kind == "range":
            self.range_depth += 1
        body, end = self.list_until()
        if kind == "range":
            self.range_depth -= 1
        orelse: list[Any] | None = None
        assert end is not None
        if end[0] == "else":
            nxt = self.peek_non_space()
            if kind in ("if", "with") and nxt.kind == "keyword" and nxt.value == kind:
                # {{else if ...}} / {{else with ...}}: a nested branch that shares our {{end}}.
                self.next()
                self.vars = self.vars[:mark]
                orelse = [self.branch(kind, nxt)]
                self.depth -= 1
                return Branch(kind, pipe, body, orelse)
            self.expect("right", "else")
            orelse, end = self.list_until()
            assert end is not None
            if end[0] != "end":
                raise self.error(end[1], "expected end; found {{else}}")
        self.expect("right", "end")
        self.vars = self.vars[:mark]
        self.depth -= 1
        return Branch(kind, pipe, body, orelse)

    def pipeline(self, context: str) -> Pipe:
        pipe = Pipe()
        # A declaration: $x := / $x = / (range only) $i, $e :=
        start = self.pos
        first = self.peek_non_space()
        if first.kind == "var":
            self.next()
            op = self.peek_non_space()
            if op.kind in (":=", "="):
                self.next()
                pipe.decl, pipe.is_assign = [first.value], op.kind == "="
            elif op.kind == "," and context == "range":
                self.next()
                second = self.expect("var", "range")
                op = self.next_non_space()
                if op.kind not in (":=", "="):
                    raise self.error(op, "range can only initialize variables")
                pipe.decl, pipe.is_assign = [first.value, second.value], op.kind == "="
            else:
                self.pos = start
        for name in pipe.decl:
            if pipe.is_assign:
                if name not in self.vars:
                    raise TemplateError(f"undefined variable: {name}")
            else:
                self.vars.append(name)
        paren = context == "parenthesized pipeline"
        while True:
            item = self.peek_non_space()
            if item.kind == "right":
                if paren:
                    raise self.error(item, "unclosed left paren")
                self.next()
                break
            if item.kind == ")":
                if not paren:
                    raise self.error(item, "unexpected right paren")
                break
            if item.kind == "eof":
                raise self.error(item, "unclosed action")
            cmd = self.command()
            pipe.cmds.append(cmd)
            nxt = self.peek_non_space()
            if nxt.kind == "|":
                self.next()
                if self.peek_non_space().kind in ("right", ")"):
                    raise self.error(nxt, "missing command after pipe")
                continue
        if not pipe.cmds:
            raise self.error(self.items[self.pos - 1], f"missing value for {context}")
        return pipe

    def command(self) -> Command:
        args: list[Any] = []
        while True:
            item = self.peek_non_space()
            if item.kind in ("right", "|", ")", "eof"):
                break
            args.append(self.operand())
            nxt = self.peek()
            if nxt.kind not in ("space", "right", "|", ")", "eof"):
                raise self.error(nxt, f"unexpected {self._describe(nxt)} in operand")
        if not args:
            raise self.error(self.peek(), "empty command")
        return Command(args)

    def operand(self) -> Any:
        node = self.term()
        fields: list[str] = []
        while self.peek().kind == "field":
            fields.append(self.next().value)
        if not fields:
            return node
        if isinstance(node, Field):
            return Field(node.idents + fields)
        if isinstance(node, Variable):
            return Variable(node.idents + fields)
        if isinstance(node, Literal | Identifier):
            raise TemplateError(f"unexpected . after term {node_text(node)}")
        return Chain(node, fields)

    def term(self) -> Any:
        item = self.next_non_space()
        if item.kind == "ident":
            if item.value not in _FUNCTION_NAMES:
                raise self.error(item, f'function "{item.value}" not defined')
            return Identifier(item.value)
        if item.kind == "dot":
            return Dot()
        if item.kind == "field":
            return Field([item.value])
        if item.kind == "var":
            if item.value not in self.vars:
                raise self.error(item, f'undefined variable "{item.value}"')
            return Variable([item.value])
        if item.kind in ("string", "number", "bool"):
            return Literal(item.value)
        if item.kind == "nil":
            return Literal(None)
        if item.kind == "(":
            pipe = self.pipeline("parenthesized pipeline")
            close = self.next_non_space()
            if close.kind != ")":
                raise self.error(close, "unclosed left paren")
            return pipe
        raise self.error(item, f"unexpected {self._describe(item)} in operand")


@dataclass
class Parsed:
    nodes: list[Any]
    defines: dict[str, list[Any]]


@functools.lru_cache(maxsize=64)
def parse(src: str) -> Parsed:
    """Parse ``src`` as Go's text/template does; raises ``TemplateError``."""
    if not isinstance(src, str):
        raise TemplateError("template is not a string")
    parser = _Parser(src)
    nodes = parser.parse()
    return Parsed(nodes, parser.defines)


def node_text(node: Any) -> str:
    if isinstance(node, Field):
        return "." + ".".join(node.idents)
    if isinstance(node, Variable):
        return ".".join(node.idents)
    if isinstance(node, Literal):
        return go_print(node.value)
    if isinstance(node, Dot):
        return "."
    return "(...)"
