"""Bad profiles, overrides and options: each is refused with exit 2 and a message naming the
file, line and limit -- never a traceback, a hang or a run that cannot finish.

The table below is the one in docs/reliability.md ("Bad input"); hypothesis fuzzing of the
same surfaces is in test_input_fuzz_profiles.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile import ProfileError, loads, yaml_guard
from harness.profile.schema.fields import MAX_ARRIVALS, MAX_MODEL_CALLS, MAX_TOKENS, MAX_TURNS
from tests.reliability.input_support import billion_laughs, cli

OK = """name: t
duration_s: 60
arrivals: {phases: [{until_s: 60, rate_per_s: 1}]}
classes: {a: {weight: 1}}
upstream: {latency: {dist: fixed, value_s: 1}, timeout_s: 30}
"""

AGENT = "{weight: 1, job: {turns: 3, tool_s: {dist: fixed, value_s: 1}}}"
TURNS = "classes.a.job.turns"

MAPPING_BOMB = "name: t\nk0: &k0 {a: 1}\n" + "".join(
    f"k{i}: &k{i} {{a: *k{i - 1}, b: *k{i - 1}, c: *k{i - 1}}}\n" for i in range(1, 30)
)

# (case, profile text, --set overrides, what the message must say)
CASES: list[tuple[str, str, list[str], str]] = [
    ("billion laughs (9 levels x 9)", billion_laughs(), [], "YAML bomb"),
    ("billion laughs in mappings (3**30)", MAPPING_BOMB, [], "YAML bomb"),
    (
        "nested lists 100,000 deep",
        "name: t\nx: " + "[" * 100_000 + "]" * 100_000 + "\n",
        [],
        "nested deeper than 64",
    ),
    (
        "nested mappings 10,000 deep",
        "name: t\nx: " + "{a: " * 10_000 + "1" + "}" * 10_000,
        [],
        "nested deeper than 64",
    ),
    (
        "block mappings 200 deep",
        "name: t\n" + "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v: 1\n",
        [],
        "nested deeper than 64",
    ),
    (
        "alias deepening past the limit",
        "name: t\na: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30 + "\n",
        [],
        "nested deeper than 64",
    ),
    ("recursive alias", "name: t\na: &a [1, *a]\n", [], "recursive"),
    ("undefined alias", "name: t\na: *nope\n", [], "YAML syntax"),
    ("profile over 1 MiB", "name: t\ndescription: " + "x" * (2 << 20) + "\n", [], "larger than"),
    ("not UTF-8", "name: \udcff", [], "not UTF-8"),
    ("integer of 5,000 digits", "name: t\nseed: " + "9" * 5000 + "\n", [], "cannot read value"),
    ("timestamp with month 13", "name: t\ndescription: 2024-13-45\n", [], "cannot read value"),
    ("duration_s: 1e12", OK.replace("duration_s: 60", "duration_s: 1e12"), [], "604,800"),
    (
        "duration_s: 10**400 (overflows a float)",
        OK.replace("duration_s: 60", "duration_s: 1" + "0" * 400),
        [],
        "finite number",
    ),
    ("rate_per_s: 1e9", OK.replace("rate_per_s: 1", "rate_per_s: 1e9"), [], f"{MAX_ARRIVALS:,}"),
    ("job.turns: 1e9", OK.replace("{weight: 1}", AGENT), [f"{TURNS}=1000000000"], f"{MAX_TURNS:,}"),
    (
        "job.turns.high: 1e9",
        OK.replace("{weight: 1}", AGENT.replace("turns: 3", "turns: {low: 1, high: 1000000000}")),
        [],
        f"{TURNS}.high: 1,000,000,000 turns",
    ),
    (
        "job.tool_s lognormal sigma 10",
        OK.replace(
            "{weight: 1}", AGENT.replace("fixed, value_s: 1", "lognormal, median_s: 1, sigma: 10")
        ),
        [],
        "classes.a.job.tool_s.sigma: this tool time can draw",
    ),
    (
        "a job expected to hold its slot past a week",
        OK.replace("{weight: 1}", AGENT.replace("value_s: 1", "value_s: 600000")),
        [f"{TURNS}=10"],
        "past a week",
    ),
    (
        "expected model calls past the limit",
        OK.replace("{weight: 1}", AGENT).replace("rate_per_s: 1", "rate_per_s: 10000"),
        [f"{TURNS}=10000"],
        f"the limit is {MAX_MODEL_CALLS:,}",
    ),
    ("seed 2**64", OK + f"seed: {2**64}\n", [], "9,223,372,036,854,775,807"),
    ("seed -1", OK + "seed: -1\n", [], "must be >= 0"),
    (
        "missing arrivals.file",
        OK.replace(
            "{phases: [{until_s: 60, rate_per_s: 1}]}", "{process: trace, file: no-such-trace.csv}"
        ),
        [],
        "no-such-trace.csv",
    ),
    ("phase past duration_s", OK.replace("until_s: 60", "until_s: 90"), [], "past duration_s"),
    (
        "executors.initial: 0",
        OK + "engine: {executors: {initial: 0}}\n",
        [],
        "nothing would ever be served",
    ),
    (
        "max_tokens: 10,000,000",
        OK.replace("{weight: 1}", "{weight: 1, max_tokens: 10000000}"),
        [],
        f"{MAX_TOKENS:,}",
    ),
    (
        "prompt_repeat of 1e9 characters",
        OK.replace(
            "{weight: 1}", "{weight: 1, prompt_repeat: {text: 'xxxxxxxxxx', times: 100000000}}"
        ),
        [],
        "1,000,000",
    ),
    ("upstream.timeout_s: 1e9", OK.replace("timeout_s: 30", "timeout_s: 1e9"), [], "a week"),
    ("engine.max_wait_s: 0", OK + "engine: {max_wait_s: 0}\n", [], "must be > 0"),
    (
        "--set value that is a YAML bomb",
        OK,
        ["description=" + billion_laughs(flow=True)],
        "YAML bomb",
    ),
    (
        "--set value nested 10,000 deep",
        OK,
        ["description=" + "[" * 10_000 + "]" * 10_000],
        "nested deeper",
    ),
    ("--set value of 100,000 characters", OK, ["description=" + "x" * 100_000], "longer than"),
    ("--set seed=2**64", OK, [f"seed={2**64}"], "must be <="),
    ("--set without '='", OK, ["duration_s"], "dotted.path=value"),
    ("--set into a scalar", OK, ["name.x=1"], "cannot descend"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("case", "text", "sets", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_profile_is_refused_with_exit_2_and_a_message(
    case: str, text: str, sets: list[str], says: str, tmp_path: Path
) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    args = ["validate", str(path)]
    for s in sets:
        args += ["--set", s]
    out = cli(args)
    assert out.clean_refusal(), (case, out.code, out.output[-500:], out.crash)
    assert says in out.output, (case, out.output[-500:])
    assert out.output.startswith("error: ") and len(out.output) < 2000


def test_a_job_past_the_limits_is_refused_at_its_line(tmp_path: Path) -> None:
    """In the file, the refusal names the line of the field: the turns, at validation, before
    anything is drawn."""
    path = tmp_path / "p.yaml"
    path.write_text(
        OK.replace(
            "classes: {a: {weight: 1}}", "classes:\n  a:\n    job:\n      turns: 1000000000\n"
        )
    )
    out = cli(["validate", str(path)])
    assert out.clean_refusal(), out.output
    assert f"{path}:7: classes.a.job.turns: 1,000,000,000 turns" in out.output


def test_a_yaml_bomb_is_refused_before_expansion() -> None:
    """Refused while composing: the walk that would expand it never runs (the bomb would
    expand to 9**9 = 387 M values; the loader stops after counting 100,000)."""
    with pytest.raises(yaml_guard.YamlLimitError) as e:
        yaml_guard.compose(billion_laughs())
    assert "100,000" in str(e.value.problem)


def test_the_limits_leave_real_profiles_alone() -> None:
    # Anchors and aliases below the limits keep working.
    text = OK + "x_defaults: &d {weight: 1}\n"
    with pytest.raises(ProfileError, match="unknown key"):
        loads(text)  # an unknown top-level key is still an error, not a crash
    prof = loads(OK.replace("classes: {a: {weight: 1}}", "classes: {a: &c {weight: 1}, b: *c}"))
    assert set(prof.classes) == {"a", "b"}


def test_a_trace_that_exists_validates(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("t\n0.5\n1.5\n")
    prof = loads(
        OK.replace("{phases: [{until_s: 60, rate_per_s: 1}]}", "{process: trace, file: t.csv}"),
        base_dir=tmp_path,
    )
    assert prof.arrivals.file == str(trace)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["stub", "--port", "99999"], "--port"),
        (["stub", "--port", "-1"], "--port"),
        (["proxy", "--upstream", "http://127.0.0.1:9", "--port", "99999"], "--port"),
        (["proxy", "--upstream", "http://127.0.0.1:9", "--port", "65536"], "--port"),
        (["run", "smoke", "--master-port", "0"], "--master-port"),
        (["worker", "--master", "127.0.0.1", "--master-port", "70000"], "--master-port"),
        (["sim", "smoke", "--seed", str(2**64)], "--seed"),
        (["sim", "smoke", "--seed", "-3"], "--seed"),
        (["stub", "--seed", str(2**63)], "--seed"),
        (["sim", "smoke", "--threshold", "turnaround_s.p96 < 60"], "unknown path"),
        (["sim", "smoke", "--threshold", "counts.arrivals <"], "--threshold"),
        (["validate", "/dev/zero"], "larger than"),
        (["validate", "/"], "cannot read profile"),
        (["validate", "no-such-profile"], "cannot read profile"),
    ],
)
def test_bad_options_exit_2_before_anything_starts(args: list[str], says: str) -> None:
    out = cli(args)
    assert out.code == 2 and out.crash is None, (args, out.code, out.output[-500:], out.crash)
    assert says in out.output, out.output[-500:]
