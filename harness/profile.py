"""YAML -> frozen, validated :class:`Profile`.

Theory of operation: the YAML is *composed* (not loaded) so every value keeps the line it
came from; ``--set`` overrides are applied to that tree; then one generic walker turns the tree
into the frozen dataclasses below, driven by their type hints and a few per-field constraints.
Every error is a :class:`ProfileError` naming file, line and dotted field -- the CLI turns it
into exit code 2 and nowhere else.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml

from harness import yaml_guard
from harness.profile_bounds import check_bounds
from harness.schema import (
    DEFAULT_ALERTS,
    FAULT_KINDS,
    FAULT_REQUIRED,
    LATENCY_PARAMS,
    PRIORITIES,
    Admission,
    AlertOverride,
    AlertRule,
    Arrivals,
    Auth,
    Breaker,
    ClientRetry,
    Clients,
    Dependency,
    Engine,
    Executors,
    Fault,
    FromEnv,
    Generator,
    Latency,
    NamePool,
    Phase,
    Priority,
    Profile,
    PromptRepeat,
    RequestClass,
    Scaling,
    Slo,
    TenantRate,
    TokenCount,
    Upstream,
    Verdict,
    Wire,
)


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


# ---------------------------------------------------------------------------------------------
# Generic walker: YAML node tree -> dataclasses.

_Lines = dict[str, int]
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _HINTS[cls] = h
    return h


class _Ctx:
    def __init__(self, file: str, lines: _Lines) -> None:
        self.file = file
        self.lines = lines

    def err(self, path: str, msg: str) -> ProfileError:
        p = path
        while p and p not in self.lines:
            p = p.rpartition(".")[0]
        return ProfileError(self.file, self.lines.get(p), path, msg)


def _join(path: str, key: str) -> str:
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


def _convert(ctx: _Ctx, tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        candidates = [a for a in args if a is not type(None)]
        errors: list[ProfileError] = []
        for a in candidates:
            try:
                return _convert(ctx, a, value, path)
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
        return tuple(_convert(ctx, item_tp, v, _join(path, str(i))) for i, v in enumerate(value))
    if origin is dict:
        (_k, item_tp) = get_args(tp)
        if not isinstance(value, dict):
            raise ctx.err(path, f"expected a mapping, got {_show(value)}")
        return {str(k): _convert(ctx, item_tp, v, _join(path, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build(ctx, tp, value, path)
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


def _build(ctx: _Ctx, cls: Any, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise ctx.err(path, f"expected a mapping, got {_show(value)}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in value:
        if key not in fields:
            known = ", ".join(fields)
            raise ctx.err(_join(path, str(key)), f"unknown key (known keys: {known})")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        fpath = _join(path, name)
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ctx.err(fpath, "required field is missing")
            continue
        v = _convert(ctx, hints[name], value[name], fpath)
        _check_bounds(ctx, f, v, fpath)
        kwargs[name] = v
    return cls(**kwargs)


def _check_bounds(ctx: _Ctx, f: dataclasses.Field[Any], v: Any, path: str) -> None:
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
# Cross-field checks the type walk cannot express.


def check_latency(ctx: _Ctx, lat: Latency, path: str) -> None:
    needed = LATENCY_PARAMS[lat.dist]
    for name in needed:
        if getattr(lat, name) is None:
            raise ctx.err(_join(path, name), f"required for dist: {lat.dist}")
    for name in ("value_s", "low_s", "high_s", "mean_s", "median_s", "sigma"):
        if name not in needed and getattr(lat, name) is not None:
            raise ctx.err(_join(path, name), f"not a parameter of dist: {lat.dist}")
    if lat.dist == "uniform" and (lat.high_s or 0) < (lat.low_s or 0):
        raise ctx.err(_join(path, "high_s"), "must be >= low_s")


def check_fault(ctx: _Ctx, fault: Fault, path: str, *, timeline: bool) -> None:
    if timeline and fault.at_s is None:
        raise ctx.err(_join(path, "at_s"), "required in a profile's fault timeline")
    if timeline and fault.for_s is None:
        raise ctx.err(_join(path, "for_s"), "required in a profile's fault timeline")
    for name in FAULT_REQUIRED.get(fault.kind, ()):
        if getattr(fault, name) is None:
            raise ctx.err(_join(path, name), f"required for kind: {fault.kind}")
    if (
        fault.kind == "status"
        and fault.status is not None
        and not (fault.status == 429 or 500 <= fault.status <= 599)
    ):
        raise ctx.err(_join(path, "status"), "must be 429 or a 5xx status")


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Headers the generator or the proxy set themselves, or that belong to the connection.
_RESERVED = frozenset(("host", "content-length", "content-type", "transfer-encoding",
                       "connection", "keep-alive", "te", "trailer", "upgrade", "expect",
                       "x-class", "x-priority", "x-tenant", "x-key", "x-request-id"))  # fmt: skip


def check_wire(ctx: _Ctx, w: Wire) -> None:
    a = w.auth
    if not _TOKEN.match(a.header) or a.header.lower() in _RESERVED:
        raise ctx.err("wire.auth.header", f"not a header name this tool can send: {a.header!r}")
    if a.scheme is not None and not _TOKEN.match(a.scheme):
        raise ctx.err("wire.auth.scheme", f"a single word such as Bearer, or null; got {a.scheme!r}")
    if a.env is not None and not _ENV.match(a.env):
        raise ctx.err("wire.auth.env", f"not an environment variable name: {a.env!r}")
    for name, v in w.headers.items():
        where = f"wire.headers.{name}"
        if not _TOKEN.match(name) or name.lower() in _RESERVED:
            raise ctx.err(where, "not a header name this tool can send")
        if name.lower() == a.header.lower():
            raise ctx.err(where, "this is wire.auth.header: set the key there")
        if isinstance(v, str) and any(c in v for c in "\r\n\0"):
            raise ctx.err(where, "a header value cannot hold CR, LF or NUL")
    for name in w.query:
        if not name:
            raise ctx.err("wire.query", "a query parameter needs a name")
    for where, v in [*((f"wire.headers.{k}", v) for k, v in w.headers.items()),
                     *((f"wire.query.{k}", v) for k, v in w.query.items())]:  # fmt: skip
        if isinstance(v, FromEnv) and not _ENV.match(v.env):
            raise ctx.err(f"{where}.env", f"not an environment variable name: {v.env!r}")


def _check(ctx: _Ctx, p: Profile) -> None:
    a = p.arrivals
    if a.process == "trace":
        if not a.file:
            raise ctx.err("arrivals.file", "required for process: trace")
    else:
        if not a.phases:
            raise ctx.err("arrivals.phases", "at least one phase is required")
        last = 0.0
        for i, ph in enumerate(a.phases):
            if ph.until_s <= last:
                raise ctx.err(
                    f"arrivals.phases.{i}.until_s",
                    f"phases out of order: {ph.until_s} is not after {last}",
                )
            last = ph.until_s
    if a.process == "gamma" and a.burstiness is None:
        raise ctx.err("arrivals.burstiness", "required for process: gamma (shape k)")
    if a.process != "gamma" and a.burstiness is not None:
        raise ctx.err("arrivals.burstiness", "only used with process: gamma")
    if not p.classes:
        raise ctx.err("classes", "at least one class is required")
    if sum(c.weight for c in p.classes.values()) <= 0:
        raise ctx.err("classes", "class weights sum to 0")
    for name, c in p.classes.items():
        if c.prompt is not None and c.prompt_repeat is not None:
            raise ctx.err(f"classes.{name}.prompt_repeat", "give prompt or prompt_repeat, not both")
        if c.latency is not None:
            check_latency(ctx, c.latency, f"classes.{name}.latency")
    check_latency(ctx, p.upstream.latency, "upstream.latency")
    tc = p.upstream.completion_tokens
    if tc is not None:
        need = ("value",) if tc.dist == "fixed" else ("low", "high")
        for n in need:
            if getattr(tc, n) is None:
                raise ctx.err(f"upstream.completion_tokens.{n}", f"required for dist: {tc.dist}")
    for i, fault in enumerate(p.faults):
        check_fault(ctx, fault, f"faults.{i}", timeline=True)
    adm = p.engine.admission
    if adm.shed_fill is not None and adm.max_queue_depth is None:
        raise ctx.err("engine.admission.shed_fill", "needs engine.admission.max_queue_depth")
    if adm.shed_fill_standard is not None and adm.shed_fill is None:
        raise ctx.err("engine.admission.shed_fill_standard", "needs engine.admission.shed_fill")
    if p.engine.scaling.enabled:
        raise ctx.err(
            "engine.scaling.enabled",
            "autoscaling is not available yet in this version; the pool is fixed",
        )
    check_wire(ctx, p.wire)
    dep = p.engine.dependency
    if dep.backoff_max_s < dep.backoff_base_s:
        raise ctx.err("engine.dependency.backoff_max_s", "must be >= backoff_base_s")
    for name in p.alerts:
        if name not in DEFAULT_ALERTS:
            raise ctx.err(f"alerts.{name}", f"unknown alert (known: {', '.join(DEFAULT_ALERTS)})")
    check_bounds(p, ctx.err)
    # Threshold expressions are checked by the results layer (it knows summary paths).
    from harness.results.thresholds import ThresholdError, parse_threshold

    for i, expr in enumerate(p.thresholds):
        try:
            parse_threshold(expr)
        except ThresholdError as e:
            raise ctx.err(f"thresholds.{i}", str(e)) from None


# ---------------------------------------------------------------------------------------------
# YAML with line numbers, overrides, public entry points.


def _node_to_py(node: yaml.Node, path: str, lines: _Lines, file: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise ProfileError(file, k.start_mark.line + 1, path, "keys must be plain names")
            key = str(k.value)
            kpath = _join(path, key)
            if key in out:
                raise ProfileError(file, k.start_mark.line + 1, kpath, "duplicate key")
            lines[kpath] = k.start_mark.line + 1
            out[key] = _node_to_py(v, kpath, lines, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_node_to_py(v, _join(path, str(i)), lines, file) for i, v in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    try:
        return _scalar(node)
    except (ValueError, yaml.YAMLError) as e:
        # e.g. an integer of 5,000 digits, or a timestamp with month 13
        line = node.start_mark.line + 1
        raise ProfileError(file, line, path, f"cannot read value: {e}") from None


def _scalar(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def apply_override(raw: dict[str, Any], assignment: str, file: str) -> None:
    """Apply one ``dotted.path=value`` (value parsed as YAML) to the raw tree."""
    path, sep, text = assignment.partition("=")
    path = path.strip()
    if not sep or not path:
        raise ProfileError(file, 0, assignment, "--set expects dotted.path=value")
    try:
        value = yaml_guard.load_value(text) if text.strip() else None
    except yaml_guard.YamlLimitError as e:
        raise ProfileError(file, 0, path, f"--set value refused: {e.problem}") from None
    except (yaml.YAMLError, ValueError) as e:
        msg = e.problem if isinstance(e, yaml.MarkedYAMLError) and e.problem else str(e)
        raise ProfileError(file, 0, path, f"--set value is not valid YAML: {msg}") from None
    if isinstance(value, dict | list):
        raise ProfileError(file, 0, path, "--set overrides scalars only")
    parts = path.split(".")
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ProfileError(file, 0, where, "--set: no such list element")
            node = node[int(part)]
        elif isinstance(node, dict):
            nxt = node.get(part)
            if nxt is None:
                nxt = {}
                node[part] = nxt
            node = nxt
        else:
            raise ProfileError(file, 0, where, "--set: not a mapping or list")
        if not isinstance(node, dict | list):
            raise ProfileError(file, 0, where, "--set: cannot descend into a scalar")
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise ProfileError(file, 0, path, "--set: no such list element")
        node[int(last)] = value
    else:
        node[last] = value


BUNDLED_PACKAGE = "harness.bundled_profiles"


def bundled_dir() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files(BUNDLED_PACKAGE)))


def resolve(spec: str) -> Path:
    """A path, or the name of a bundled profile (``seed-burst``)."""
    p = Path(spec)
    if p.is_file():
        return p
    if "/" not in spec and not spec.endswith((".yaml", ".yml")):
        cand = bundled_dir() / f"{spec}.yaml"
        if cand.exists():
            return cand
    if p.suffix in (".yaml", ".yml") and "/" not in spec:
        cand = bundled_dir() / spec
        if cand.exists():
            return cand
    return p


def load(spec: str, overrides: typing.Sequence[str] = ()) -> Profile:
    """Read, override and validate a profile; raises ProfileError on any problem."""
    path = resolve(spec)
    file = str(spec)
    try:
        with path.open("rb") as fh:
            text = fh.read(yaml_guard.MAX_BYTES + 1)  # not read_bytes: /dev/zero never ends
    except OSError as e:
        raise ProfileError(file, None, "", f"cannot read profile: {e.strerror or e}") from None
    return loads(text, file=file, overrides=overrides, base_dir=path.parent)


def loads(
    text: bytes | str,
    *,
    file: str = "<profile>",
    overrides: typing.Sequence[str] = (),
    base_dir: Path | None = None,
) -> Profile:
    data = text.encode() if isinstance(text, str) else text
    if len(data) > yaml_guard.MAX_BYTES:
        raise ProfileError(file, None, "", f"larger than {yaml_guard.MAX_BYTES:,} bytes (a "
                           "profile is a config file; put arrival traces in arrivals.file)")  # fmt: skip
    try:
        node = yaml_guard.compose(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProfileError(file, None, "", "not UTF-8 text") from None
    except yaml_guard.YamlLimitError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, "", f"YAML refused: {e.problem}") from None
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, "", f"YAML syntax: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ProfileError(file, None, "", f"YAML: {e}") from None
    if node is None:
        raise ProfileError(file, None, "", "empty profile")
    lines: _Lines = {}
    try:
        raw = _node_to_py(node, "", lines, file)
    except yaml.YAMLError as e:
        raise ProfileError(file, None, "", f"YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ProfileError(file, 1, "", "a profile is a mapping")
    for assignment in overrides:
        apply_override(raw, assignment, file)
        lines[assignment.partition("=")[0].strip()] = 0
    ctx = _Ctx(file, lines)
    prof: Profile = _build(ctx, Profile, raw, "")
    if "slo" not in raw:  # the default SLO was not declared: it informs, it does not gate
        prof = dataclasses.replace(prof, slo=dataclasses.replace(prof.slo, enforce=False))
    if prof.arrivals.file and base_dir is not None and not Path(prof.arrivals.file).is_absolute():
        prof = dataclasses.replace(
            prof,
            arrivals=dataclasses.replace(prof.arrivals, file=str(base_dir / prof.arrivals.file)),
        )
    _check(ctx, prof)
    digest = hashlib.sha256(data).hexdigest()
    return dataclasses.replace(prof, source=file, sha256=digest)


def to_dict(obj: Any) -> Any:
    """The effective (fully defaulted) profile as plain data, for --print and summary.json."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, tuple | list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def parse_fault_list(data: Any, *, source: str = "faults") -> tuple[Fault, ...]:
    """Fault entries from an API body (the stub's PUT /_stub/faults): at_s/for_s optional."""
    ctx = _Ctx(source, {})
    faults = _convert(ctx, tuple[Fault, ...], data, "")
    for i, f in enumerate(faults):
        check_fault(ctx, f, str(i), timeline=False)
    return typing.cast(tuple[Fault, ...], faults)


__all__ = [
    "DEFAULT_ALERTS",
    "FAULT_KINDS",
    "FAULT_REQUIRED",
    "LATENCY_PARAMS",
    "PRIORITIES",
    "Admission",
    "AlertOverride",
    "AlertRule",
    "Arrivals",
    "Auth",
    "Breaker",
    "ClientRetry",
    "Clients",
    "Dependency",
    "Engine",
    "Executors",
    "Fault",
    "FromEnv",
    "Generator",
    "Latency",
    "NamePool",
    "Phase",
    "Priority",
    "Profile",
    "ProfileError",
    "PromptRepeat",
    "RequestClass",
    "Scaling",
    "Slo",
    "TenantRate",
    "TokenCount",
    "Upstream",
    "Verdict",
    "Wire",
    "apply_override",
    "bundled_dir",
    "check_fault",
    "check_latency",
    "load",
    "loads",
    "parse_fault_list",
    "resolve",
    "to_dict",
]
