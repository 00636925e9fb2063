"""Where a file over several runs came from: ``aggregate.json``, ``sweep.json`` and
``harness compare --format json`` each carry the same provenance keys at their top level.

- ``schema_version``: the file's layout (an integer; a key renamed or removed raises it, a key
  added does not), one per kind of file;
- ``harness_version``: the harness that wrote the file (``harness.__version__``);
- the profile (``name``, ``sha256`` of the profile file; for runs, ``effective_sha256`` of the
  effective profile, ``--set`` overrides applied), the seeds, and the rule for "holds
  over seeds" (``over_seeds``: the profile's ``verdict.over_seeds`` ``setting`` and the ``rule``
  in the words of :meth:`harness.results.seed_rule.SeedRule.text`).

aggregate.json and sweep.json have one profile; compare's JSON has one per side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import harness
from harness.results.seed_rule import SeedRule
from harness.results.shapes import OverSeeds, ProfileProvenance, Stamp, Summary

AGGREGATE_SCHEMA = 1
SWEEP_SCHEMA = 1
COMPARE_SCHEMA = 1
_SIDE_KEYS = ("name", "sha256", "effective_sha256", "over_seeds")


def stamp(schema_version: int) -> Stamp:
    """The two keys every such file opens with."""
    return {"schema_version": schema_version, "harness_version": harness.__version__}


def rule_block(setting: str | float | None, seeds: int) -> OverSeeds:
    """``over_seeds``: the setting and the rule in words at ``seeds`` seeds (as sweep.json and
    tune.json write it)."""
    rule = SeedRule.of(setting)
    return {"setting": rule.setting, "rule": rule.text(seeds)}


def over_seeds_of(summary: Summary) -> str | float:
    """A summary's ``verdict.over_seeds`` (``every`` when the summary predates it)."""
    verdict = (summary.get("effective") or {}).get("verdict") or {}
    setting = verdict.get("over_seeds", "every")
    return setting if isinstance(setting, str | float | int) else "every"


def effective_sha256(summary: Summary) -> str | None:
    """SHA-256 of the summary's ``effective`` profile (canonical JSON: sorted keys, no spaces):
    unlike ``profile.sha256`` (the file's bytes) it tells apart runs of one file under different
    ``--set`` overrides. None when the summary has no ``effective`` block."""
    effective = summary.get("effective")
    if not isinstance(effective, Mapping):
        return None
    text = json.dumps(effective, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def profile_of(summary: Summary) -> ProfileProvenance:
    """``name`` and ``sha256`` of the profile a summary ran, and its ``effective_sha256``."""
    p = summary.get("profile") or {}
    return {
        "name": p.get("name"),
        "sha256": p.get("sha256"),
        "effective_sha256": effective_sha256(summary),
    }


def compare_provenance(
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    seeds: tuple[Sequence[int | None], Sequence[int | None]],
) -> dict[str, object]:
    """The provenance keys of compare's JSON. ``base`` and ``new``: each side's ``name``,
    ``sha256``, ``effective_sha256`` (None for a sweep) and ``over_seeds`` setting; ``seeds``:
    the seeds each side's figures come from. The rule shown is the candidate's (NEW's): the
    one a rollout of it is judged by."""
    return {
        **stamp(COMPARE_SCHEMA),
        "profiles": {
            "base": {k: base.get(k) for k in _SIDE_KEYS},
            "new": {k: new.get(k) for k in _SIDE_KEYS},
        },
        "seeds": {"base": list(seeds[0]), "new": list(seeds[1])},
        "over_seeds": rule_block(new.get("over_seeds"), len(seeds[1])),
    }
