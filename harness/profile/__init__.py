"""YAML -> frozen, validated :class:`Profile`.

Theory of operation: the YAML is *composed* (not loaded) so every value keeps the line it
came from; ``--set`` overrides are applied to that tree; then one generic walker
(:mod:`harness.profile.walk`) turns the tree into the frozen dataclasses of
:mod:`harness.profile.schema`, and :mod:`harness.profile.checks` checks what crosses fields.
Every error is a :class:`ProfileError` naming file, line and dotted field -- the CLI turns it
into exit code 2 and nowhere else.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.profile import yaml_guard
from harness.profile.checks import check_fault, check_latency, check_profile
from harness.profile.schema import (
    FAULT_KINDS,
    FAULT_REQUIRED,
    LATENCY_PARAMS,
    PRIORITIES,
    Admission,
    Arrivals,
    Breaker,
    ClientRetry,
    Clients,
    Dependency,
    Engine,
    Executors,
    Fault,
    JobShape,
    Latency,
    NamePool,
    Phase,
    Priority,
    Profile,
    PromptRepeat,
    RequestClass,
    TenantRate,
    TokenCount,
    TraceBin,
    TraceClasses,
    TraceOptions,
    TraceSessions,
    TurnRange,
    Upstream,
)
from harness.profile.schema.scaling import Scaling
from harness.profile.schema.verdict import DEFAULT_ALERTS, AlertOverride, AlertRule, Slo, Verdict
from harness.profile.schema.wire import Auth, FromEnv, Generator, Wire
from harness.profile.thresholds import check_names
from harness.profile.walk import (
    Ctx,
    Lines,
    ProfileError,
    build,
    convert,
    did_you_mean,
    join,
    nearest,
)
from harness.profile.walk import field_types as walk_field_types


def _node_to_py(node: yaml.Node, path: str, lines: Lines, file: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise ProfileError(file, k.start_mark.line + 1, path, "keys must be plain names")
            key = str(k.value)
            kpath = join(path, key)
            if key in out:
                raise ProfileError(file, k.start_mark.line + 1, kpath, "duplicate key")
            lines[kpath] = k.start_mark.line + 1
            out[key] = _node_to_py(v, kpath, lines, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_node_to_py(v, join(path, str(i)), lines, file) for i, v in enumerate(node.value)]
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


# A map's entry that is not in the profile is added only when its name is marked ``+``
# (``classes.+batch.weight=0.2``): a misspelt name (``classes.acme_chat`` for ``acme-chat``)
# must not quietly become a new class with the default weight.
ADD = "+"
# What one entry of each map is called, in messages.
_ENTRY = {
    "classes": "class",
    "alerts": "alert",
    "headers": "header",
    "query": "query parameter",
    "per_call": "price",
}


def _shape(tp: Any) -> tuple[str, Any]:
    """What a schema type holds, for walking an override's path: ("fields", the dataclass),
    ("map", the value type), ("list", the item type) or ("scalar", None). Of a union, its one
    mapping or list member (``str | NamePool``: the NamePool)."""
    members = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        members = [tp]
    for m in members:
        if dataclasses.is_dataclass(m):
            return "fields", m
        origin = typing.get_origin(m)
        if origin is dict:
            return "map", typing.get_args(m)[1]
        if origin is tuple:
            return "list", typing.get_args(m)[0]
    return "scalar", None


def _implied(raw: dict[str, Any], where: str) -> tuple[str, ...]:
    """Entries a map holds without the profile listing them: the built-in alerts, and a price
    per class of this profile."""
    if where == "alerts":
        return tuple(DEFAULT_ALERTS)
    if where == "engine.cost.per_call":
        classes = raw.get("classes")
        return tuple(str(k) for k in classes) if isinstance(classes, dict) else ()
    return ()


@dataclass(frozen=True, slots=True)
class Override:
    """One ``--set dotted.path=value``, read: the path, the value (YAML, a scalar) and the
    assignment as it was given (what messages and results show). Typed, so a plan carries
    overrides as data and applies them to a loaded profile without reading text again."""

    path: str
    value: Any  # a scalar as YAML reads it: str, int, float, bool, None, a date ...
    given: str  # ``path=value`` as written

    def __str__(self) -> str:
        return self.given


def parse_override(assignment: str, file: str) -> Override:
    """``dotted.path=value`` read into an :class:`Override` (the value parsed as YAML); a
    ProfileError naming ``file`` and the path when it is not one."""
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
    return Override(path, value, assignment)


def apply_override(
    raw: dict[str, Any], assignment: str | Override, file: str, added: set[str] | None = None
) -> str:
    """Apply one ``dotted.path=value`` (value parsed as YAML; or an :class:`Override`
    already read) to the raw tree; return the path as the profile spells it (without ``+``
    markers).

    Each step of the path is checked against the schema: a key a section does not have, or
    an entry a map (``classes``, ``alerts``, ``wire.headers`` ...) does not hold, is refused
    with the nearest name; a new map entry is written ``+name`` (``classes.+batch.weight=0.2``).
    ``added`` collects the entries this load's overrides added, so later overrides may name
    them with or without the ``+``."""
    o = parse_override(assignment, file) if isinstance(assignment, str) else assignment
    path, value, assignment = o.path, o.value, o.given
    added = set() if added is None else added
    parts = path.split(".")
    clean: list[str] = []  # the path so far, without + markers
    tp: Any = Profile
    node: Any = raw
    for i, part in enumerate(parts):
        final = i == len(parts) - 1
        where = ".".join(clean)
        kind, inner = _shape(tp)
        if kind == "scalar":
            raise ProfileError(file, 0, where, "--set: cannot descend into a scalar")
        if kind == "map" and isinstance(node, dict):
            part = _map_entry(raw, node, parts, i, where, file, assignment, added)
        elif part.startswith(ADD):
            what = where or "the top level"
            raise ProfileError(file, 0, path, f"'{ADD}' adds an entry to a map; {what} is not one")
        elif kind == "fields":
            known = walk_field_types(inner)
            if part not in known:
                hint = did_you_mean(part, known)
                at = f" in {where}" if where else ""
                raise ProfileError(file, 0, path, f"unknown key {part!r}{at}{hint}")
            inner = known[part]
        clean.append(part)
        if final:
            break
        tp = inner
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ProfileError(file, 0, ".".join(clean), "--set: no such list element")
            node = node[int(part)]
        elif isinstance(node, dict):
            nxt = node.get(part)
            if nxt is None:
                nxt = {}
                node[part] = nxt
            node = nxt
        else:
            raise ProfileError(file, 0, ".".join(clean), "--set: not a mapping or list")
        if not isinstance(node, dict | list):
            raise ProfileError(file, 0, ".".join(clean), "--set: cannot descend into a scalar")
    last = clean[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise ProfileError(file, 0, path, "--set: no such list element")
        node[int(last)] = value
    else:
        node[last] = value
    return ".".join(clean)


def _map_entry(
    raw: dict[str, Any],
    node: dict[str, Any],
    parts: list[str],
    i: int,
    where: str,
    file: str,
    assignment: str,
    added: set[str],
) -> str:
    """The entry of the map ``node`` (at ``where``) that ``parts[i]`` names: one the map holds
    (or implies), or a new one marked ``+``."""
    part, path = parts[i], ".".join(parts)
    noun = _ENTRY.get(where.rpartition(".")[2], "entry")
    if part.startswith(ADD):
        name = part[len(ADD) :]
        entry = join(where, name)
        if not name:
            raise ProfileError(file, 0, path, f"'{ADD}' needs the new {noun}'s name after it")
        if name in node and entry not in added:
            plain = ".".join([*parts[:i], name, *parts[i + 1 :]])
            raise ProfileError(
                file, 0, path, f"{where} already has {noun} {name!r}: to change it, write {plain}"
            )
        added.add(entry)
        return name
    implied = _implied(raw, where)
    if part in node or part in implied:
        return part
    known = list(dict.fromkeys([*(str(k) for k in node), *implied]))
    said = f"no {noun} {part!r} in {where}{did_you_mean(part, known)}"
    said += f"; known: {', '.join(known)}" if known else f"; it has no {noun} yet"
    if implied:  # a closed set: the built-in alerts, the profile's classes
        raise ProfileError(file, 0, path, said)
    marked = ".".join([*parts[:i], ADD + part, *parts[i + 1 :]])
    value = assignment.partition("=")[2].strip()
    raise ProfileError(file, 0, path, f"{said}; to add one, write {marked}={value}")


BUNDLED_PACKAGE = "harness.bundled_profiles"


def bundled_dir() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files(BUNDLED_PACKAGE)))


def resolve(spec: str) -> Path:
    """A path, or the name of a bundled profile (``seed-burst``, ``scenarios/short-spike``)."""
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
    if spec.startswith("scenarios/") and ".." not in p.parts:
        # the scenario library: `harness sim scenarios/metric-outage`
        for cand in (bundled_dir() / spec, bundled_dir() / f"{spec}.yaml"):
            if cand.is_file():
                return cand
    return p


def bundled_names() -> list[str]:
    """The bundled profiles' names, as ``harness profiles`` lists them and ``resolve`` takes
    them: ``seed-burst``, ``scenarios/short-spike``."""
    root = bundled_dir()
    paths = sorted(root.glob("*.yaml")) + sorted((root / "scenarios").glob("*.yaml"))
    return [p.relative_to(root).with_suffix("").as_posix() for p in paths]


def missing_hint(spec: str) -> str:
    """For a profile that is neither a file nor a bundled name: the nearest bundled name
    (``seed-brust`` -> ``seed-burst``; a scenario's name without ``scenarios/`` counts), or
    the nearest YAML file beside a path whose folder exists; else where to look."""
    p = Path(spec)
    if "/" in spec and not spec.startswith("scenarios/"):
        if p.parent.is_dir():
            yamls = [str(f) for f in p.parent.iterdir() if f.suffix in (".yaml", ".yml")]
            return did_you_mean(spec, yamls)
        return ""
    names = bundled_names()
    keys = {n: n for n in names} | {Path(n).name: n for n in names}  # scenarios/x also as x
    near = nearest(spec.removesuffix(".yaml").removesuffix(".yml"), keys)
    if near is not None:
        return f" (did you mean {keys[near]!r}?)"
    return "; nor a bundled profile (harness profiles lists them)"


@dataclass(frozen=True, slots=True)
class ProfileSource:
    """A profile's YAML read and composed once: the tree (each value with its line), the
    bytes' SHA-256, and the folder a relative ``arrivals.file`` is read against. A profile
    with overrides is built from it (:func:`apply_overrides`) without reading text again; it
    pickles, so a worker process gets it as data."""

    file: str  # the name the profile was given by (messages, ``source``)
    data: bytes  # the file's bytes (a cluster's workers get them)
    sha256: str
    raw: dict[str, Any]
    lines: dict[str, int]
    base_dir: Path | None = None


def read_source(spec: str) -> ProfileSource:
    """Read and compose a profile (a path or a bundled name); raises ProfileError."""
    path = resolve(spec)
    file = str(spec)
    try:
        with path.open("rb") as fh:
            text = fh.read(yaml_guard.MAX_BYTES + 1)  # not read_bytes: /dev/zero never ends
    except OSError as e:
        hint = missing_hint(spec) if isinstance(e, FileNotFoundError) else ""
        raise ProfileError(
            file, None, "", f"cannot read profile: {e.strerror or e}{hint}"
        ) from None
    return parse_source(text, file=file, base_dir=path.parent)


def parse_source(
    text: bytes | str, *, file: str = "<profile>", base_dir: Path | None = None
) -> ProfileSource:
    """Compose a profile's text into a :class:`ProfileSource`; raises ProfileError."""
    data = text.encode() if isinstance(text, str) else text
    if len(data) > yaml_guard.MAX_BYTES:
        raise ProfileError(
            file,
            None,
            "",
            f"larger than {yaml_guard.MAX_BYTES:,} bytes (a "
            "profile is a config file; put arrival traces in arrivals.file)",
        )
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
    lines: Lines = {}
    try:
        raw = _node_to_py(node, "", lines, file)
    except yaml.YAMLError as e:
        raise ProfileError(file, None, "", f"YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ProfileError(file, 1, "", "a profile is a mapping")
    digest = hashlib.sha256(data).hexdigest()
    return ProfileSource(file, data, digest, raw, lines, base_dir)


def apply_overrides(
    source: ProfileSource, overrides: typing.Sequence[str | Override] = ()
) -> Profile:
    """The profile ``source`` holds with ``overrides`` applied in order (each ``--set`` text
    or :class:`Override`), walked into dataclasses and checked; raises ProfileError. The one
    place a profile is built from its tree: ``load``, ``loads`` and every plan's trial."""
    file = source.file
    raw: dict[str, Any] = copy.deepcopy(source.raw)
    lines: Lines = dict(source.lines)
    added: set[str] = set()
    for assignment in overrides:
        lines[apply_override(raw, assignment, file, added)] = 0
    ctx = Ctx(file, lines)
    prof: Profile = build(ctx, Profile, raw, "")
    if "slo" not in raw:  # the default SLO was not declared: it informs, it does not gate
        prof = dataclasses.replace(prof, slo=dataclasses.replace(prof.slo, enforce=False))
    if prof.arrivals.file:
        prof = dataclasses.replace(
            prof, arrivals=_pinned_trace(ctx, prof.arrivals, source.base_dir)
        )
    check_profile(ctx, prof)
    return dataclasses.replace(prof, source=file, sha256=source.sha256)


def load(spec: str, overrides: typing.Sequence[str | Override] = ()) -> Profile:
    """Read, override and validate a profile; raises ProfileError on any problem."""
    return apply_overrides(read_source(spec), overrides)


def loads(
    text: bytes | str,
    *,
    file: str = "<profile>",
    overrides: typing.Sequence[str | Override] = (),
    base_dir: Path | None = None,
) -> Profile:
    return apply_overrides(parse_source(text, file=file, base_dir=base_dir), overrides)


@dataclass(frozen=True, slots=True)
class LoadedProfile:
    """A profile loaded once: its source, the command's overrides (typed) and the Profile
    they make. A plan carries it and builds each trial's profile from it with
    :meth:`with_overrides`, never reading the file again."""

    spec: str  # the profile as named on the command line
    source: ProfileSource
    overrides: tuple[Override, ...]
    profile: Profile

    def with_overrides(self, more: typing.Sequence[Override] = ()) -> Profile:
        """The profile with the command's overrides and then ``more``; raises ProfileError."""
        if not more:
            return self.profile
        return apply_overrides(self.source, [*self.overrides, *more])

    def bare(self) -> Profile:
        """The profile as its file has it, without the command's overrides."""
        return apply_overrides(self.source) if self.overrides else self.profile


def load_once(spec: str, overrides: typing.Sequence[str] = ()) -> LoadedProfile:
    """Read ``spec`` once and apply ``overrides`` (``--set`` texts): the
    :class:`LoadedProfile` a plan carries; raises ProfileError as :func:`load` does."""
    source = read_source(spec)
    prof = apply_overrides(source, overrides)  # an error names the first bad override
    typed = tuple(parse_override(o, source.file) for o in overrides)
    return LoadedProfile(spec, source, typed, prof)


_TRACE_CACHE: dict[tuple[str, int, int], tuple[str, bytes]] = {}  # (path, size, mtime_ns)
_TRACES_KEPT = 4  # the traces a process keeps (a sweep over arrivals.file: one per value)


def _trace(path: str) -> tuple[str, bytes]:
    """A trace file's SHA-256 and bytes, read once per process while its size and
    modification time stay the same; OSError when it cannot be read."""
    p = Path(path)
    st = p.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    got = _TRACE_CACHE.get(key)
    if got is None:
        with p.open("rb") as fh:
            data = fh.read()
        got = (hashlib.sha256(data).hexdigest(), data)
        while len(_TRACE_CACHE) >= _TRACES_KEPT:
            del _TRACE_CACHE[next(iter(_TRACE_CACHE))]
        _TRACE_CACHE[key] = got
    return got


def trace_sha256(path: str) -> str:
    """The SHA-256 (hex) of a trace file's bytes; OSError when it cannot be read. The bytes
    are kept per process by path, size and modification time (:func:`trace_bytes`): the
    profile's load pins the trace, and the schedule reads the same bytes, not the file."""
    return _trace(path)[0]


def trace_bytes(path: str) -> bytes:
    """A trace file's bytes, read once per process (while its size and modification time
    stay the same) for the load's pin and the schedule alike; OSError when unreadable."""
    return _trace(path)[1]


def _pinned_trace(ctx: Ctx, a: Arrivals, base_dir: Path | None) -> Arrivals:
    """``arrivals.file`` as an absolute path (a relative one is read against the profile's
    folder, so a copy of the profile elsewhere -- a live run's children, a summary's
    ``effective`` -- names the same file) and ``file_sha256`` filled in. A profile that gives
    ``file_sha256`` is refused when the file is missing or its bytes differ; otherwise an
    unreadable trace is left to the trace reader, which names it."""
    assert a.file is not None
    file = Path(a.file)
    if not file.is_absolute() and base_dir is not None:
        file = base_dir / file
    name = os.path.abspath(file) if file.is_absolute() or base_dir is not None else a.file
    pinned = a.file_sha256
    field = "arrivals.file_sha256"
    if pinned is not None and not (
        len(pinned) == 64 and all(c in "0123456789abcdef" for c in pinned)
    ):
        raise ctx.err(field, "not a SHA-256 (64 lowercase hex digits)")
    try:
        digest: str | None = trace_sha256(name)
    except OSError as e:
        if pinned is not None:
            raise ctx.err("arrivals.file", f"cannot read trace {name}: {e.strerror or e}") from None
        digest = None
    if pinned is not None and digest != pinned:
        raise ctx.err(
            field,
            f"the trace {name} is not the file this profile names: its SHA-256 is "
            f"{digest}, the profile's {pinned}",
        )
    return dataclasses.replace(a, file=name, file_sha256=digest)


def to_dict(obj: Any) -> Any:
    """The effective (fully defaulted) profile as plain data, for --print and summary.json
    (a field's key is its YAML key: metadata ``key`` where the name is a Python keyword; a
    field marked ``omit_none`` is left out while null, as if it did not exist)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.metadata.get("key", f.name): to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
            and not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)
        }
    if isinstance(obj, tuple | list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def parse_fault_list(data: Any, *, source: str = "faults") -> tuple[Fault, ...]:
    """Fault entries from an API body (the stub's PUT /_stub/faults): at_s/for_s optional."""
    ctx = Ctx(source, {})
    faults = convert(ctx, tuple[Fault, ...], data, "")
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
    "JobShape",
    "Latency",
    "LoadedProfile",
    "NamePool",
    "Override",
    "Phase",
    "Priority",
    "Profile",
    "ProfileError",
    "ProfileSource",
    "PromptRepeat",
    "RequestClass",
    "Scaling",
    "Slo",
    "TenantRate",
    "TokenCount",
    "TraceBin",
    "TraceClasses",
    "TraceOptions",
    "TraceSessions",
    "TurnRange",
    "Upstream",
    "Verdict",
    "Wire",
    "apply_override",
    "apply_overrides",
    "bundled_dir",
    "check_fault",
    "check_latency",
    "check_names",
    "load",
    "load_once",
    "loads",
    "parse_fault_list",
    "parse_override",
    "parse_source",
    "read_source",
    "resolve",
    "to_dict",
    "trace_bytes",
    "trace_sha256",
]
