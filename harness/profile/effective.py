"""A run's ``effective`` profile (summary.json) loaded again, to re-simulate the run.

A re-simulation must run what the run ran. The effective profile names its trace file by the
absolute path the run read and that file's SHA-256 (``arrivals.file``, ``arrivals.file_sha256``),
so it does not matter which folder the re-simulation starts in. A trace named by a relative path
(a summary written before paths were recorded whole) or without its SHA-256 cannot be told from
another file of that name: it is refused, as is a trace that is missing or whose bytes differ.
Every refusal is a :class:`ProfileError` naming the field, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.profile import ProfileError, loads
from harness.profile.schema import Profile

SOURCE = "<effective profile>"


def effective_text(effective: Any, source: str = SOURCE) -> str:
    """``effective`` as the text :func:`load_effective` reads, checked first (the profile
    loads, its trace is there and is the run's): ProfileError otherwise."""
    if not isinstance(effective, Mapping):
        raise ProfileError(source, None, "", "not a profile (a mapping of its fields)")
    arrivals = effective.get("arrivals")
    trace = arrivals.get("file") if isinstance(arrivals, Mapping) else None
    if trace is not None:
        if not isinstance(trace, str) or not Path(trace).is_absolute():
            raise ProfileError(
                source,
                None,
                "arrivals.file",
                f"the run's trace is named by a relative path ({trace!r}): which file the run "
                "read is not known, so it is not re-simulated (a run of this version records "
                "the absolute path and the file's SHA-256)",
            )
        if not isinstance(arrivals, Mapping) or arrivals.get("file_sha256") is None:
            raise ProfileError(
                source,
                None,
                "arrivals.file_sha256",
                f"the run recorded no SHA-256 of its trace {trace}: that the file there is "
                "the one the run read cannot be checked, so it is not re-simulated",
            )
    text = json.dumps(effective, sort_keys=True)
    load_effective(text, source)
    return text


def load_effective(text: str, source: str = SOURCE) -> Profile:
    """The profile of :func:`effective_text`'s text (its trace's SHA-256 checked as it loads)."""
    return loads(text, file=source)
