"""A profile as data, for a process that cannot read the caller's files (a cluster's worker).

:func:`make_bundle` reads the profile and the trace file its arrivals name (after the caller's
``--set``) into bytes; :func:`load_bundle` rebuilds the same :class:`Profile` from them on the
other side, with the trace written to a private temporary folder there. The profile's
``sha256`` and ``source`` are the caller's, so results name the profile as a local run does.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.profile import ProfileError, load, loads, resolve
from harness.profile.schema import Profile


@dataclass(frozen=True, slots=True)
class ProfileBundle:
    """The profile file's bytes, the name it was given by, and its trace file's bytes."""

    text: bytes
    source: str
    trace_name: str | None = None  # the trace file's name (its suffix selects the reader)
    trace: bytes | None = None

    @property
    def key(self) -> str:
        """A digest of everything the bundle holds: equal keys, equal profiles."""
        h = hashlib.sha256(self.text)
        for part in (self.source, self.trace_name or ""):
            h.update(b"\0" + part.encode())
        h.update(b"\0" + (self.trace or b""))
        return h.hexdigest()


def make_bundle(spec: str, overrides: Sequence[str] = ()) -> ProfileBundle:
    """Read ``spec`` and the trace file its arrivals name with ``overrides`` applied (the
    caller's ``--set``; each task still carries its own) into a bundle. The profile is loaded
    once here, so a bad profile fails in the caller (ProfileError)."""
    prof = load(spec, list(overrides))
    path = resolve(spec)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ProfileError(spec, None, "", f"cannot read profile: {e.strerror or e}") from None
    trace_name = trace = None
    if prof.arrivals.file:
        tpath = Path(prof.arrivals.file)
        try:
            trace = tpath.read_bytes()
        except OSError as e:
            raise ProfileError(
                str(tpath), None, "arrivals.file", f"cannot read trace: {e.strerror}"
            ) from None
        trace_name = tpath.name
    return ProfileBundle(text, spec, trace_name, trace)


_TRACES: dict[str, Path] = {}  # bundle key -> the trace written in this process
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
    if bundle.trace is not None:
        path = _TRACES.get(bundle.key)
        if path is None:
            folder = Path(tempfile.mkdtemp(prefix="harness-trace-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / (bundle.trace_name or "trace")
            path.write_bytes(bundle.trace)
            _TRACES[bundle.key] = path
        sets.append(f"arrivals.file={path}")
    prof = loads(bundle.text, file=bundle.source, overrides=sets)
    _PROFILES[cache] = prof
    return prof
