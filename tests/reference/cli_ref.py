"""docs/reference/cli.md, produced from the click command tree of ``harness.cli:app``.

Everything is read from the parameters themselves (names, metavar or type, default, range,
help), never from rendered ``--help``, so no terminal width or colour can change a byte.
Typer ships its own copy of click: the walk checks for methods, not classes.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Any

import typer

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "docs" / "reference" / "cli.md"
REGEN = "python -m tests.reference.regen cli"
# A < that would open an HTML tag in Markdown (<path>, <profile>): escaped outside code spans.
_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def app_command() -> Any:
    """The click command tree of ``harness.cli:app``, built afresh (callers may change it)."""
    from harness.cli import app

    return typer.main.get_command(app)


def commands(root: Any) -> list[tuple[Any, Any]]:
    """(command, context) for the root and every command under it, depth first, in the order
    ``--help`` lists them."""
    found: list[tuple[Any, Any]] = []

    def walk(cmd: Any, ctx: Any) -> None:
        found.append((cmd, ctx))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, sub.context_class(sub, info_name=name, parent=ctx))

    walk(root, root.context_class(root, info_name="harness"))
    return found


def _paragraphs(text: str | None) -> list[str]:
    """Help text as paragraphs, single line breaks joined (as ``--help`` shows them)."""
    body = (text or "").partition("\f")[0]
    lines = [line.strip() for line in body.strip().splitlines()]
    out: list[str] = []
    for block in "\n".join(lines).split("\n\n"):
        joined = " ".join(part for part in block.split("\n") if part)
        if joined:
            out.append(_TAG.sub(r"\\<", joined))
    return out


def purpose(cmd: Any) -> str:
    first = _paragraphs(cmd.help)
    return first[0] if first else ""


def _code(text: str) -> str:
    tick = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def _type(param: Any, ctx: Any) -> str:
    if getattr(param, "is_flag", False) and not getattr(param, "count", False):
        return "flag"
    shown = getattr(param, "display_type_rich", None) or getattr(param, "display_type", None)
    label = shown(ctx) if shown is not None else (param.metavar or param.type.name)
    return _code(str(label))


def _range(param: Any) -> str:
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f"at least {low}"
    if high is not None:
        return f"at most {high}"
    return ""


def _default(param: Any) -> str:
    """The default as ``--help`` states it; empty when it states none (show_default False: the
    help text says it), or when the default is None, empty or an unset flag."""
    show = param.show_default
    if isinstance(show, str):
        return str(show)
    value = param.default
    if show is False or value is None or getattr(param, "required", False):
        return ""
    if getattr(param, "is_flag", False) and isinstance(value, bool):
        if param.secondary_opts:
            return str((param.opts if value else param.secondary_opts)[0])
        return "on" if value else ""
    if callable(value):
        return "(dynamic)"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return _plain(value)


def _plain(value: Any) -> str:
    return str(value.value) if isinstance(value, enum.Enum) else str(value)


def _facts(param: Any, ctx: Any, *, argument: bool) -> str:
    facts = [_type(param, ctx)]
    if argument:
        facts.append("required" if param.required else "optional")
    elif param.required:
        facts.append("required")
    default = _default(param)
    if default:
        facts.append(f"default {_code(default)}")
    span = _range(param)
    if span:
        facts.append(span)
    if param.multiple or (argument and param.nargs != 1):
        facts.append("repeatable")
    envvar = param.envvar
    if envvar:
        names = [envvar] if isinstance(envvar, str) else list(envvar)
        facts.append("env " + ", ".join(_code(n) for n in names))
    return "; ".join(facts)


def _param_lines(param: Any, ctx: Any) -> list[str]:
    argument = getattr(param, "param_type_name", "") == "argument"
    if argument:
        name = _code(getattr(param, "display_name_raw", None) or param.name)
    else:
        name = " / ".join(_code(o) for o in [*param.opts, *param.secondary_opts])
    help_ = " ".join(_paragraphs(param.help))
    line = f"- {name} ({_facts(param, ctx, argument=argument)})"
    return [f"{line}: {help_}" if help_ else line]


def _section(cmd: Any, ctx: Any) -> list[str]:
    path = ctx.command_path
    usage = " ".join([path, *cmd.collect_usage_pieces(ctx)])
    out = [f"## {path}", "", *_join(_paragraphs(cmd.help)), "", "```", usage, "```", ""]
    params = [p for p in cmd.params if not p.hidden]
    arguments = [p for p in params if getattr(p, "param_type_name", "") == "argument"]
    options = [p for p in params if getattr(p, "param_type_name", "") != "argument"]
    if arguments:
        out += ["Arguments:", ""]
        for p in arguments:
            out += _param_lines(p, ctx)
        out.append("")
    if options:
        out += ["Options:", ""]
        for p in options:
            out += _param_lines(p, ctx)
        out.append("")
    if hasattr(cmd, "list_commands"):
        subs = [(n, cmd.get_command(ctx, n)) for n in cmd.list_commands(ctx)]
        out += ["Commands:", ""]
        out += [
            f"- [{path} {n}](#{_anchor(f'{path} {n}')}): {purpose(s)}"
            for n, s in subs
            if s is not None and not s.hidden
        ]
        out.append("")
    return out


def _join(paragraphs: list[str]) -> list[str]:
    out: list[str] = []
    for p in paragraphs:
        out += [p, ""]
    return out[:-1]


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, spaces to hyphens, other punctuation dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def produce(root: Any | None = None) -> str:
    """The whole of docs/reference/cli.md for ``root`` (default: ``harness.cli:app``)."""
    found = commands(app_command() if root is None else root)
    lines = [
        "# harness command-line reference",
        "",
        f"<!-- Generated from harness.cli:app by `{REGEN}`; do not edit by hand. -->",
        "",
        "Every command and its arguments and options, as `--help` gives them. Every command",
        "also takes `--help`. A test fails when this file and the code disagree. The commands",
        "are listed under `harness`, the first section.",
        "",
    ]
    for cmd, ctx in found:
        lines += _section(cmd, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"
