"""Flags parsed as Ollama's CLI parses them (spf13/pflag): a boolean flag, or one with a value of its
own when bare (``--think``), takes another value only as ``--flag=value``, never from the next word,
which stays an argument: ``cllm run --think qwen3 "why?"`` is the flag, the model, then the prompt."""

from __future__ import annotations

from collections.abc import Iterator

import click

from cllm_ollama.gostrconv import PARSE_BOOL_FALSE, PARSE_BOOL_TRUE

# Where a bare-valued flag's ``=value`` goes: a hidden option of the same name with this suffix.
VALUE_SUFFIX = "-value"


def _rewritten(command: click.Command, args: list[str]) -> Iterator[str]:
    """``args`` with each ``--flag=value`` of a boolean flag as the flag (true) or its ``--no-``
    twin or nothing (false), and of a bare-valued flag as its hidden ``--flag-value VALUE``."""
    flags = {name: p for p in command.params if isinstance(p, click.Option) and p.is_flag for name in p.opts}
    for i, arg in enumerate(args):
        if arg == "--":
            yield from args[i:]
            return
        name, eq, value = arg.partition("=")
        option = flags.get(name) if eq and name.startswith("--") else None
        if option is None:
            yield arg
        elif not option.is_bool_flag:
            yield f"{name}{VALUE_SUFFIX}"
            yield value
        elif value in PARSE_BOOL_TRUE:
            yield name
        elif value in PARSE_BOOL_FALSE:
            yield from option.secondary_opts[:1]
        else:
            raise click.UsageError(
                f'invalid argument "{value}" for "{name}" flag: strconv.ParseBool: parsing "{value}": invalid syntax'
            )


class GoFlags(click.Command):
    """A command whose flags take values as pflag's do (``_rewritten``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, list(_rewritten(self, args)))
