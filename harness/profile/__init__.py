"""YAML -> frozen, validated :class:`Profile`.

Theory of operation: the YAML is *composed* (not loaded) so every value keeps the line it
came from; ``--set`` overrides are applied to that tree; then one generic walker
(:mod:`harness.profile.walk`) turns the tree into the frozen dataclasses of
:mod:`harness.profile.schema`, and :mod:`harness.profile.checks` checks what crosses fields.
Every error is a :class:`ProfileError` naming file, line and dotted field -- the CLI turns it
into exit code 2 and nowhere else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import typing
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
    Upstream,
)
from harness.profile.schema.scaling import Scaling
from harness.profile.schema.verdict import DEFAULT_ALERTS, AlertOverride, AlertRule, Slo, Verdict
from harness.profile.schema.wire import Auth, FromEnv, Generator, Wire
from harness.profile.walk import Ctx, Lines, ProfileError, build, convert, join


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
    for assignment in overrides:
        apply_override(raw, assignment, file)
        lines[assignment.partition("=")[0].strip()] = 0
    ctx = Ctx(file, lines)
    prof: Profile = build(ctx, Profile, raw, "")
    if "slo" not in raw:  # the default SLO was not declared: it informs, it does not gate
        prof = dataclasses.replace(prof, slo=dataclasses.replace(prof.slo, enforce=False))
    if prof.arrivals.file and base_dir is not None and not Path(prof.arrivals.file).is_absolute():
        prof = dataclasses.replace(
            prof,
            arrivals=dataclasses.replace(prof.arrivals, file=str(base_dir / prof.arrivals.file)),
        )
    check_profile(ctx, prof)
    digest = hashlib.sha256(data).hexdigest()
    return dataclasses.replace(prof, source=file, sha256=digest)


def to_dict(obj: Any) -> Any:
    """The effective (fully defaulted) profile as plain data, for --print and summary.json
    (a field's key is its YAML key: metadata ``key`` where the name is a Python keyword)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.metadata.get("key", f.name): to_dict(getattr(obj, f.name))
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
    "TraceBin",
    "TraceClasses",
    "TraceOptions",
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
