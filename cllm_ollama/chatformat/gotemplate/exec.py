"""Execution (Go's ``text/template/exec.go``): a parse tree walked with data as dot, under a render budget."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..render_budget import PromptTooLong, RenderBudget
from .funcs import FUNCS
from .parser import (
    Action,
    Branch,
    Chain,
    Command,
    Dot,
    Field,
    Identifier,
    Literal,
    Loop,
    Parsed,
    Pipe,
    TemplateCall,
    Text,
    Variable,
    node_text,
    parse,
)
from .values import NO_VALUE, GoStruct, TemplateError, go_print, truth, type_name

MAX_TEMPLATE_CALLS = 100  # nested {{ template }} calls (Go allows 100000: far past Python's stack)
_CHECK_EVERY = 1024  # steps between looks at the clock


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Output:
    """The text rendered so far, and the budget it is rendered under."""

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.pieces: list[str] = []
        self.size = 0
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps % _CHECK_EVERY == 0:
            self.budget.check_turn()

    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > self.budget.max_chars:
            raise PromptTooLong(self.budget.max_chars)
        self.pieces.append(text)


class _State:
    def __init__(self, parsed: Parsed, out: _Output) -> None:
        self.parsed = parsed
        self.out = out
        self.vars: list[tuple[str, Any]] = []
        self.calls = 0

    # variables
    def push(self, name: str, value: Any) -> None:
        self.vars.append((name, value))

    def set_var(self, name: str, value: Any) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise TemplateError(f"undefined variable: {name}")

    def var(self, name: str) -> Any:
        for key, value in reversed(self.vars):
            if key == name:
                return value
        raise TemplateError(f"undefined variable: {name}")

    # walking
    def walk(self, dot: Any, nodes: list[Any]) -> None:
        for node in nodes:
            self.out.step()
            if isinstance(node, Text):
                self.out.write(node.text)
            elif isinstance(node, Action):
                value = self.pipeline(dot, node.pipe)
                if not node.pipe.decl:
                    self.out.write(go_print(value))
            elif isinstance(node, Branch):
                self.branch(dot, node)
            elif isinstance(node, Loop):
                raise _Break() if node.kind == "break" else _Continue()
            elif isinstance(node, TemplateCall):
                self.call_template(dot, node)

    def branch(self, dot: Any, node: Branch) -> None:
        mark = len(self.vars)
        try:
            if node.kind == "range":
                self.range(dot, node)
                return
            value = self.pipeline(dot, node.pipe)
            if truth(value):
                self.walk(value if node.kind == "with" else dot, node.body)
            elif node.orelse is not None:
                self.walk(dot, node.orelse)
        finally:
            del self.vars[mark:]

    def range(self, dot: Any, node: Branch) -> None:
        pipe = node.pipe
        value = self.pipeline(dot, Pipe(cmds=pipe.cmds))
        items = self._range_items(value, len(pipe.decl))
        if not items:
            if node.orelse is not None:
                self.walk(dot, node.orelse)
            return
        mark = len(self.vars)
        for key, elem in items:
            self.out.step()
            if len(pipe.decl) == 1:
                self._bind(pipe, 0, elem)
            elif len(pipe.decl) == 2:
                self._bind(pipe, 0, key)
                self._bind(pipe, 1, elem)
            try:
                self.walk(elem, node.body)
            except _Continue:
                pass
            except _Break:
                break
            finally:
                del self.vars[mark:]  # the loop's variables and the body's, fresh each time

    def _bind(self, pipe: Pipe, i: int, value: Any) -> None:
        if pipe.is_assign:
            self.set_var(pipe.decl[i], value)
        else:
            self.push(pipe.decl[i], value)

    @staticmethod
    def _range_items(value: Any, names: int) -> Iterable[tuple[Any, Any]]:
        if value is None or value is NO_VALUE:
            return []
        if isinstance(value, list | tuple):
            return list(enumerate(value))
        if isinstance(value, dict):
            return [(key, value[key]) for key in sorted(value)]
        if isinstance(value, int) and not isinstance(value, bool):
            # Since Go 1.22, range over an int counts from 0, into one variable only.
            if names > 1:
                raise TemplateError(f"can't use {value} to iterate over more than one variable")
            return _IntRange(value)
        raise TemplateError(f"range can't iterate over {go_print(value)}")

    def call_template(self, dot: Any, node: TemplateCall) -> None:
        body = self.parsed.defines.get(node.name)
        if body is None:
            raise TemplateError(f'no such template "{node.name}"')
        value = self.pipeline(dot, node.pipe) if node.pipe is not None else None
        self.calls += 1
        if self.calls > MAX_TEMPLATE_CALLS:
            raise TemplateError(f"exceeded maximum template depth ({MAX_TEMPLATE_CALLS})")
        saved, self.vars = self.vars, [("$", value)]
        try:
            self.walk(value, body)
        finally:
            self.vars = saved
            self.calls -= 1

    # pipelines
    def pipeline(self, dot: Any, pipe: Pipe) -> Any:
        value: Any = _MISSING
        for cmd in pipe.cmds:
            value = self.command(dot, cmd, value)
        for name in pipe.decl:
            if pipe.is_assign:
                self.set_var(name, value)
            else:
                self.push(name, value)
        return value

    def command(self, dot: Any, cmd: Command, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, Identifier):
            return self.function(dot, first.name, cmd.args[1:], final)
        if len(cmd.args) > 1 or final is not _MISSING:
            raise TemplateError(f"can't give argument to non-function {node_text(first)}")
        return self.arg(dot, first)

    def arg(self, dot: Any, node: Any) -> Any:
        self.out.step()
        if isinstance(node, Dot):
            return dot
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Field):
            return self.fields(dot, node.idents, node)
        if isinstance(node, Variable):
            return self.fields(self.var(node.idents[0]), node.idents[1:], node)
        if isinstance(node, Pipe):
            return self.pipeline(dot, node)
        if isinstance(node, Chain):
            return self.fields(self.arg(dot, node.node), node.fields, node)
        if isinstance(node, Identifier):
            return self.function(dot, node.name, [], _MISSING)
        raise TemplateError(f"can't evaluate {node!r}")

    def fields(self, value: Any, names: list[str], node: Any) -> Any:
        for name in names:
            if isinstance(value, GoStruct):
                if name not in value.fields:
                    raise TemplateError(f"can't evaluate field {name} in type {value.type_name}")
                value = value.fields[name]
            elif isinstance(value, dict):
                value = value.get(name, NO_VALUE)
            elif value is None or value is NO_VALUE:
                raise TemplateError(f"nil pointer evaluating {type_name(value)}.{name}")
            else:
                raise TemplateError(f"can't evaluate field {name} in type {type_name(value)}")
        return value

    def function(self, dot: Any, name: str, args: list[Any], final: Any) -> Any:
        if name in ("and", "or"):
            nodes = list(args)
            if not nodes and final is _MISSING:
                raise TemplateError(f"wrong number of args for {name}: want at least 1 got 0")
            value: Any = None
            for node in nodes:
                value = self.arg(dot, node)
                if truth(value) == (name == "or"):
                    return value
            if final is not _MISSING:
                value = final
            return value
        values = [self.arg(dot, node) for node in args]
        if final is not _MISSING:
            values.append(final)
        fn = FUNCS[name]
        try:
            return fn(*values)
        except TemplateError:
            raise
        except TypeError as exc:
            raise TemplateError(f"error calling {name}: wrong number of args ({len(values)})") from exc


class _IntRange:
    def __init__(self, n: int) -> None:
        self.n = n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((i, i) for i in range(self.n))


_MISSING = object()


def execute(parsed: Parsed, data: Any, budget: RenderBudget | None = None, nodes: list[Any] | None = None) -> str:
    """Run a parsed template with ``data`` as dot (and ``$``)."""
    out = _Output(budget or RenderBudget())
    state = _State(parsed, out)
    state.push("$", data)
    try:
        state.walk(data, parsed.nodes if nodes is None else nodes)
    except (_Break, _Continue) as exc:  # the parser allows them only inside range
        raise TemplateError("break or continue outside range") from exc
    except RecursionError as exc:
        raise TemplateError("template too deeply nested") from exc
    return "".join(out.pieces)


def render_go_template(template: str, data: dict[str, Any], budget: RenderBudget | None = None) -> str:
    """Render ``template`` with ``data`` (keys as Go field names: System, Prompt, Messages...).

    Past the ``budget``'s deadline or output size, rendering stops with an error.
    """
    return execute(parse(template), data, budget)
