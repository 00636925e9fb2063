"""A profile as data, for a process that cannot read the caller's files (a cluster's worker).

:func:`make_bundle` reads the profile and the trace file its arrivals name (after the caller's
``--set``) into bytes, and the trace of each value a parameter may give ``arrivals.file``;
:func:`load_bundle` rebuilds the same :class:`Profile` from them on the other side, with the
trace it needs written to a private temporary folder there. The profile's ``sha256`` and
``source`` are the caller's, so results name the profile as a local run does.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.profile import ProfileError, load, loads, resolve, yaml_guard
from harness.profile.schema import Profile

TRACE_KEY = "arrivals.file"


@dataclass(frozen=True, slots=True)
class ProfileBundle:
    """The profile file's bytes, the name it was given by, its trace file's bytes, and the
    traces an ``arrivals.file=VALUE`` override may choose: (VALUE, file name, bytes)."""

    text: bytes
    source: str
    trace_name: str | None = None  # the trace file's name (its suffix selects the reader)
    trace: bytes | None = None
    choices: tuple[tuple[str, str, bytes], ...] = ()

    @property
    def key(self) -> str:
        """A digest of everything the bundle holds: equal keys, equal profiles."""
        h = hashlib.sha256(self.text)
        for part in (self.source, self.trace_name or ""):
            h.update(b"\0" + part.encode())
        h.update(b"\0" + (self.trace or b""))
        for value, name, data in self.choices:
            h.update(b"\0%d:%s\0%s\0" % (len(data), value.encode(), name.encode()) + data)
        return h.hexdigest()


def make_bundle(
    spec: str, overrides: Sequence[str] = (), trace_values: Sequence[str] = ()
) -> ProfileBundle:
    """Read ``spec`` and the trace file its arrivals name with ``overrides`` applied (the
    caller's ``--set``; each task still carries its own) into a bundle, and the trace of each
    of ``trace_values`` (values a parameter gives ``arrivals.file``, as its ``--set`` writes
    them). The profile is loaded here, so a bad profile or trace fails in the caller
    (ProfileError)."""
    prof = load(spec, list(overrides))
    path = resolve(spec)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ProfileError(spec, None, "", f"cannot read profile: {e.strerror or e}") from None
    trace_name = trace = None
    if prof.arrivals.file:
        trace_name, trace = _read_trace(prof.arrivals.file)
    choices: list[tuple[str, str, bytes]] = []
    for value in dict.fromkeys(trace_values):
        chosen = load(spec, [*overrides, f"{TRACE_KEY}={value}"]).arrivals.file
        if chosen:
            choices.append((_value(value), *_read_trace(chosen)))
    return ProfileBundle(text, spec, trace_name, trace, tuple(choices))


def _read_trace(file: str) -> tuple[str, bytes]:
    tpath = Path(file)
    try:
        return tpath.name, tpath.read_bytes()
    except OSError as e:
        raise ProfileError(
            str(tpath), None, TRACE_KEY, f"cannot read trace: {e.strerror}"
        ) from None


def _value(text: str) -> str:
    """An override's right-hand side as the profile reads it (YAML: ``'a.csv'`` is a.csv)."""
    try:
        return str(yaml_guard.load_value(text))
    except Exception:  # the profile's own load reports a bad value; here it only names one
        return text


def _chosen(bundle: ProfileBundle, overrides: Sequence[str]) -> tuple[str, str, bytes] | None:
    """The shipped trace ``overrides`` choose (the last ``arrivals.file=`` wins), else the
    bundle's own trace, else None."""
    for assignment in reversed(overrides):
        path, _, text = assignment.partition("=")
        if path.strip() == TRACE_KEY:
            value = _value(text)
            hit = next((c for c in bundle.choices if c[0] == value), None)
            if hit is not None:
                return hit
            break  # the bundle's own trace is the one the caller's --set chose
    if bundle.trace is None:
        return None
    return "", bundle.trace_name or "trace", bundle.trace


_TRACES: dict[tuple[str, str], Path] = {}  # (bundle key, value) -> the trace written here
_PROFILES: dict[tuple[str, tuple[str, ...]], Profile] = {}


def load_bundle(bundle: ProfileBundle, overrides: Sequence[str] = ()) -> Profile:
    """The bundle's profile with ``overrides`` applied, as ``load(spec, overrides)`` gives it
    where the files are (cached per process). The trace, if any, is written once per process
    into a temporary folder that is removed when the process exits."""
    cache = (bundle.key, tuple(overrides))
    prof = _PROFILES.get(cache)
    if prof is not None:
        return prof
    sets = list(overrides)
    chosen = _chosen(bundle, overrides)
    if chosen is not None:
        value, name, data = chosen
        path = _TRACES.get((bundle.key, value))
        if path is None:
            folder = Path(tempfile.mkdtemp(prefix="harness-trace-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / (name or "trace")
            path.write_bytes(data)
            _TRACES[(bundle.key, value)] = path
        sets.append(f"{TRACE_KEY}={path}")
    prof = loads(bundle.text, file=bundle.source, overrides=sets)
    _PROFILES[cache] = prof
    return prof
