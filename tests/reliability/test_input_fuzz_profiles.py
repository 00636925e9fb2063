"""Seeded fuzzing of the profile loader, ``--set`` and ``--threshold`` (hypothesis).

Every input either validates or is refused with a ProfileError / ThresholdError (the CLI's
exit 2 with a message) -- nothing else may escape. A mutated profile that validates is also
run in the simulation when it is small, because "validates, then hangs or crashes" is the
other half of the defect. Derandomized: the same examples every run, so a
failure reproduces; the counts are fixed (``max_examples``) and reported in
docs/reliability.md.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from harness.profile import Profile, ProfileError, loads, to_dict
from harness.profile.bounds import expected_arrivals
from harness.profile.thresholds import ThresholdError, parse_threshold
from harness.results.thresholds import evaluate_threshold
from harness.sim.runner import simulate
from tests.reliability.input_support import BUNDLED, BUNDLED_NAMES, cli

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TEXTS = {n: (BUNDLED / f"{n}.yaml").read_text() for n in BUNDLED_NAMES}
RAWS = {n: yaml.safe_load(t) for n, t in TEXTS.items()}

# Values at and around the edges the loader has to hold: zero, signs, the documented limits,
# floats that overflow or are not numbers, YAML's own spellings of them.
EDGES: list[Any] = [
    0,
    -1,
    1,
    0.0,
    -0.0,
    1e-300,
    1e308,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    604_800,
    604_801,
    131_072,
    131_073,
    20_000_000,
    1e9,
    1e12,
    10**400,
    math.inf,
    -math.inf,
    math.nan,
    "1e12",
    "1e9",
    ".inf",
    ".nan",
    "~",
    "0x10",
    "1_000",
    "0o17",
    "yes",
    "",
    " ",
    "null",
    "2024-13-45",
    "\x00",
    "é" * 5,
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(EDGES),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(raw: Any, path: tuple[Any, ...], op: str, value: Any, key: str) -> Any:
    if not path:
        return value if op == "replace" else raw
    parent = raw
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last][key] = value  # "add": a new (perhaps unknown) key
    return raw


@st.composite
def mutated_profiles(draw: st.DrawFn) -> str:
    import copy

    raw = copy.deepcopy(RAWS[draw(st.sampled_from(BUNDLED_NAMES))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(raw)))
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        key = draw(st.sampled_from(["max_wait_s", "deadline_s", "file", "colour", "process"]))
        raw = _mutate(raw, path, op, draw(values), key)
    return yaml.safe_dump(raw, allow_unicode=True)


def _small(p: Profile) -> bool:
    """Small enough to simulate inside a fuzz example: every time <= 600 s, few arrivals."""

    def ok(node: Any, key: str = "") -> bool:
        if isinstance(node, dict):
            return all(ok(v, k) for k, v in node.items())
        if isinstance(node, list):
            return all(ok(v, key) for v in node)
        if isinstance(node, int | float) and not isinstance(node, bool):
            return not (key.endswith("_s") and not key.endswith("per_s") and node > 600)
        return True

    return p.arrivals.process != "trace" and expected_arrivals(p) <= 3000 and ok(to_dict(p))


def _accept_or_refuse(text: str, overrides: list[str] | None = None) -> Profile | None:
    try:
        return loads(text, file="fuzz.yaml", overrides=overrides or [])
    except ProfileError as e:
        msg = str(e)
        assert msg.startswith("fuzz.yaml") and "\n" not in msg, msg
        event("refused")
        return None


def _runs_cleanly(p: Profile) -> None:
    yaml.safe_dump(to_dict(p), allow_unicode=True)  # validate --print
    event("accepted")
    if _small(p):
        event("accepted and simulated")
        s = simulate(p, 1).summary
        assert s["conservation"]["ok"], s["conservation"]


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=600)
@given(text=mutated_profiles())
def test_mutated_bundled_profiles_validate_and_run_or_are_refused(text: str) -> None:
    p = _accept_or_refuse(text)
    if p is not None:
        _runs_cleanly(p)


@pytest.mark.timeout(60)
@settings(FUZZ, max_examples=500)
@given(text=st.one_of(st.text(max_size=300), values.map(lambda v: yaml.safe_dump(v))))
def test_random_yaml_documents_validate_or_are_refused(text: str) -> None:
    _accept_or_refuse(text)


def _leaf(raw: Any, path: tuple[Any, ...]) -> bool:
    for p in path:
        raw = raw[p]
    return not isinstance(raw, dict | list)


SET_PATHS = sorted(
    {
        ".".join(map(str, p))
        for n in BUNDLED_NAMES
        for p in _paths(RAWS[n])
        if p and _leaf(RAWS[n], p)
    }
    | {
        "engine.max_wait_s",
        "seed",
        "duration_s",
        "classes.small.max_wait_s",
        "engine.executors.initial",
        "arrivals.file",
        "arrivals.process",
    }
)
set_values = st.one_of(
    *[st.integers(-10, 10**7).map(str), st.floats(0, 1e6).map(repr)] * 2,
    st.text(max_size=40),
    st.sampled_from([str(e) for e in EDGES]),
    st.sampled_from(["[1, 2]", "{a: 1}", "&a [*a]", "*x", "[[[[", "'", "!!python/name:os.system"]),
)
set_paths = st.one_of(
    *[st.sampled_from(SET_PATHS)] * 6,
    st.text(max_size=20),
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "a..b",
            "arrivals.phases.99.until_s",
            "arrivals.phases.-1.until_s",
            "classes.small.0",
        ]
    ),
)


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=600)
@given(
    name=st.sampled_from(BUNDLED_NAMES),
    sets=st.lists(
        st.tuples(set_paths, set_values, st.sampled_from(["="] * 9 + [""])), min_size=1, max_size=2
    ),
)
def test_set_overrides_validate_and_run_or_are_refused(
    name: str, sets: list[tuple[str, str, str]]
) -> None:
    p = _accept_or_refuse(TEXTS[name], [f"{k}{eq}{v}" for k, v, eq in sets])
    if p is not None:
        _runs_cleanly(p)


SUMMARY_PATHS = [
    "turnaround_s.p95",
    "counts.arrivals",
    "counts.rejected",
    "counts.expired",
    "counts.expired_by_reason.max_wait",
    "counts.rejected_by_reason.queue_age",
    "queue_wait_s.max",
    "by_class.small.turnaround_s.p95",
    "goodput_per_s",
]
OPS = ["<", "<=", ">", ">=", "==", "!=", "=", "=<", "<>", ""]
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.text("0123456789.eE+-", max_size=12),
    st.sampled_from(["1e99999", "-0", ".5", "5.", "1e", "nan", "inf"]),
)
thresholds = st.one_of(
    st.builds(
        lambda a, slash, b, op, n, sp: sp.join([a, *(["/", b] if slash else []), op, n]),
        st.one_of(st.sampled_from(SUMMARY_PATHS), st.text(max_size=15)),
        st.booleans(),
        st.sampled_from(SUMMARY_PATHS),
        st.sampled_from(OPS),
        numbers,
        st.sampled_from([" ", "", "  ", "\t"]),
    ),
    st.text(max_size=60),
)
_SUMMARY: dict[str, Any] = {}


@pytest.mark.timeout(60)
@settings(FUZZ, max_examples=1000)
@given(expr=thresholds)
def test_thresholds_parse_and_evaluate_or_are_refused(expr: str) -> None:
    if not _SUMMARY:
        _SUMMARY.update(simulate(loads(TEXTS["smoke"]), 1).summary)
    try:
        t = parse_threshold(expr)
    except ThresholdError as e:
        assert str(e) and "\n" not in str(e)
        return
    r = evaluate_threshold(t, _SUMMARY)
    assert isinstance(r["ok"], bool) and (r["value"] is not None or "why" in r)


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=40)
@given(expr=thresholds, sets=st.lists(st.tuples(set_paths, set_values), max_size=2))
def test_cli_with_fuzzed_threshold_and_set_exits_cleanly(
    expr: str, sets: list[tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    overrides = [f"{k}={v}" for k, v in sets]
    try:
        p = loads(TEXTS["smoke"], overrides=overrides)
        assume(_small(p))  # a valid but week-long run is not for a fuzz example
    except ProfileError:
        pass  # refused: the CLI must say so with exit 2
    out_dir: Path = tmp_path_factory.mktemp("fuzz-cli")
    args = ["sim", "smoke", "--no-report", "--out", str(out_dir), "--threshold", expr]
    for o in overrides:
        args += ["--set", o]
    out = cli(args)
    assert out.crash is None, out.crash
    assert out.code in (0, 1, 2), (out.code, out.output[-500:])
    assert "Traceback" not in out.output
    if out.code == 2:
        assert "error:" in out.output
