"""The generic walker: a YAML tree (plain data plus a line per dotted path) -> frozen dataclasses.

Driven by the dataclasses' type hints and a few per-field constraints (``gt``/``ge``/``le`` in
field metadata). Every error is a :class:`ProfileError` naming file, line and dotted field.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin


class ProfileError(Exception):
    """A bad profile or override: carries file, line and field for a one-line message."""

    def __init__(self, file: str, line: int | None, field_path: str, message: str) -> None:
        self.file = file
        self.line = line
        self.field_path = field_path
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            where = self.file
        elif self.line == 0:  # the value came from a --set override
            where = f"{self.file} (--set)"
        else:
            where = f"{self.file}:{self.line}"
        return _printable(f"{where}: {self.field_path or '<root>'}: {self.message}")


def _printable(text: str) -> str:
    """One line, whatever the YAML held: a key with a newline in it is shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


Lines = dict[str, int]
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _HINTS[cls] = h
    return h


def field_types(cls: type) -> dict[str, Any]:
    """A dataclass's fields by their YAML key (metadata ``key`` where the name is a Python
    keyword), each with its type hint; internal fields (not read from YAML) left out."""
    hints = _hints(cls)
    return {
        f.metadata.get("key", f.name): hints[f.name]
        for f in dataclasses.fields(cls)
        if not f.metadata.get("internal")
    }


class Ctx:
    def __init__(self, file: str, lines: Lines) -> None:
        self.file = file
        self.lines = lines

    def err(self, path: str, msg: str) -> ProfileError:
        p = path
        while p and p not in self.lines:
            p = p.rpartition(".")[0]
        return ProfileError(self.file, self.lines.get(p), path, msg)


def nearest(word: str, choices: typing.Iterable[str]) -> str | None:
    """The nearest of ``choices`` to a misspelt ``word`` by difflib's ratio (at least 0.6:
    ``acme_chat`` -> ``acme-chat``), or None."""
    import difflib

    near = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return near[0] if near else None


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for :func:`nearest`, else ``""``."""
    near = nearest(word, choices)
    return f" (did you mean {near!r}?)" if near is not None else ""


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin is tuple:
        return "a list"
    if origin is dict:
        return "a mapping"
    return {float: "a number", int: "an integer", bool: "true/false", str: "a string"}.get(
        tp, str(tp)
    )


def convert(ctx: Ctx, tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        candidates = [a for a in args if a is not type(None)]
        errors: list[ProfileError] = []
        for a in candidates:
            try:
                return convert(ctx, a, value, path)
            except ProfileError as e:
                errors.append(e)
        # Prefer the error from the branch whose shape matched (deeper path).
        deep = [e for e in errors if e.field_path != path]
        if deep:
            raise deep[0]
        raise ctx.err(path, f"expected {_type_name(tp)}, got {_show(value)}")
    if origin is Literal:
        if value not in get_args(tp):
            raise ctx.err(path, f"expected one of {_type_name(tp)}, got {_show(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ctx.err(path, f"expected true/false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ctx.err(path, f"expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, str) and _SCI.match(value):
            value = float(value)  # YAML 1.1 reads "1e9" as a string; a number was meant
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ctx.err(path, f"expected a number, got {_show(value)}")
        try:
            f = float(value)
        except OverflowError:  # an integer too large for a float
            f = math.inf
        if not math.isfinite(f):
            raise ctx.err(path, f"expected a finite number, got {_show(value)}")
        return f
    if tp is str:
        if isinstance(value, datetime.date):  # YAML reads 2024-10-21 as a date: its text was meant
            return value.isoformat()
        if not isinstance(value, str):
            raise ctx.err(path, f"expected a string, got {_show(value)}")
        return value
    if origin is tuple:
        (item_tp, _ell) = get_args(tp)
        if not isinstance(value, list):
            raise ctx.err(path, f"expected a list, got {_show(value)}")
        return tuple(convert(ctx, item_tp, v, join(path, str(i))) for i, v in enumerate(value))
    if origin is dict:
        (_k, item_tp) = get_args(tp)
        if not isinstance(value, dict):
            raise ctx.err(path, f"expected a mapping, got {_show(value)}")
        return {str(k): convert(ctx, item_tp, v, join(path, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(ctx, tp, value, path)
    raise TypeError(f"unsupported schema type {tp!r}")  # a bug in the schema, not bad input


_SCI = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."  # keep a message one line


def build(ctx: Ctx, cls: Any, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise ctx.err(path, f"expected a mapping, got {_show(value)}")
    hints = _hints(cls)
    # A field's YAML key is its name, or metadata ``key`` where the name is a Python keyword.
    fields = {
        f.metadata.get("key", f.name): f
        for f in dataclasses.fields(cls)
        if not f.metadata.get("internal")
    }
    for key in value:
        if key not in fields:
            known = ", ".join(fields)
            hint = did_you_mean(str(key), fields)
            raise ctx.err(join(path, str(key)), f"unknown key{hint} (known keys: {known})")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        fpath = join(path, name)
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ctx.err(fpath, "required field is missing")
            continue
        v = convert(ctx, hints[f.name], value[name], fpath)
        _check_bounds(ctx, f, v, fpath)
        kwargs[f.name] = v
    return cls(**kwargs)


def _check_bounds(ctx: Ctx, f: dataclasses.Field[Any], v: Any, path: str) -> None:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return
    m = f.metadata
    if "gt" in m and not v > m["gt"]:
        raise ctx.err(path, f"must be > {m['gt']}, got {v}")
    if "ge" in m and not v >= m["ge"]:
        raise ctx.err(path, f"must be >= {m['ge']}, got {v}")
    if "le" in m and not v <= m["le"]:
        why = f" ({m['why']})" if "why" in m else ""
        raise ctx.err(path, f"must be <= {_limit(m['le'])}{why}, got {_show(v)}")


def _limit(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


# ---------------------------------------------------------------------------------------------
