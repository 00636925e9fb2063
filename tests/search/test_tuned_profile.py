"""tuned.yaml: a profile with only the tuned keys changed, everything else byte for byte."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
import yaml

from harness.profile import ProfileError, loads
from harness.search.tune.tuned_yaml import format_number, round_sig, tuned_yaml

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "profiles").glob("*.yaml")) + sorted(
    (ROOT / "profiles" / "scenarios").glob("*.yaml")
)

BLOCK = """\
# my profile
name: mine
engine:
  admission:
    age_reject_s: 25  # seconds in queue before a 429
    depth_mult: 2
  executors: {initial: 4}
thresholds:
  - "counts.completed > 0"
"""


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (17.345, 17.3),
        (0.012345, 0.0123),
        (1234.5, 1230.0),
        (0.0, 0.0),
        (0.1 + 0.2, 0.3),
        (-17.345, -17.3),
        (0.1235, 0.124),  # halves round away from zero, on the decimal a person reads
        (999.5, 1000.0),
        (7.0, 7.0),
        (2.5e-7, 2.5e-7),
    ],
)
def test_round_sig(x: float, want: float) -> None:
    assert round_sig(x) == want


def test_round_sig_digits() -> None:
    assert round_sig(17.345, 2) == 17.0
    assert round_sig(17.345, 4) == 17.35
    assert round_sig(123456.0, 1) == 100000.0


@pytest.mark.parametrize(
    ("v", "want"),
    [
        (1230.0, "1230"),
        (17.3, "17.3"),
        (2.0, "2"),
        (1e-05, "0.00001"),
        (7, "7"),
        (0.0, "0"),
        (-0.0, "0"),
        (-2.5, "-2.5"),
        (1.5e16, "15000000000000000"),
        (0.3, "0.3"),
    ],
)
def test_format_number(v: float, want: str) -> None:
    assert format_number(v) == want


def test_format_number_refuses_nan() -> None:
    with pytest.raises(ValueError, match="nan"):
        format_number(float("nan"))


def test_replace_in_block_keeps_trailing_comment() -> None:
    out = tuned_yaml(BLOCK, {"engine.admission.age_reject_s": 17.3}, [])
    assert out == BLOCK.replace("age_reject_s: 25  #", "age_reject_s: 17.3  #")


def test_replace_inside_flow_mapping() -> None:
    out = tuned_yaml(BLOCK, {"engine.executors.initial": 6}, [])
    assert out == BLOCK.replace("{initial: 4}", "{initial: 6}")


def test_replace_keeps_quoting_elsewhere_and_quotes_unsafe_strings() -> None:
    src = "name: x\nengine:\n  scaling: {target: 'weighted', enabled: true}\n"
    assert tuned_yaml(src, {"engine.scaling.target": "hpa"}, []) == src.replace("'weighted'", "hpa")
    out = tuned_yaml(src, {"engine.scaling.target": "yes"}, [])
    assert "{target: 'yes', enabled: true}" in out
    assert yaml.safe_load(out)["engine"]["scaling"]["target"] == "yes"


def test_insert_into_existing_block_parent() -> None:
    out = tuned_yaml(BLOCK, {"engine.admission.shed_fill": 0.8}, [])
    assert out == BLOCK.replace("    depth_mult: 2\n", "    depth_mult: 2\n    shed_fill: 0.8\n")


def test_insert_creates_two_missing_levels() -> None:
    out = tuned_yaml(BLOCK, {"engine.scaling.behavior.max_replicas": 7}, [])
    want = BLOCK.replace(
        "  executors: {initial: 4}\n",
        "  executors: {initial: 4}\n  scaling:\n    behavior:\n      max_replicas: 7\n",
    )
    assert out == want


def test_insert_into_flow_parent() -> None:
    out = tuned_yaml(BLOCK, {"engine.executors.startup_s": 10}, [])
    assert out == BLOCK.replace("{initial: 4}", "{initial: 4, startup_s: 10}")
    out = tuned_yaml(BLOCK, {"engine.executors.hpa.target": 2.0}, [])
    assert out == BLOCK.replace("{initial: 4}", "{initial: 4, hpa: {target: 2}}")


def test_insert_at_top_level_when_branch_absent() -> None:
    src = "name: mine  # no engine at all\nduration_s: 60"  # and no final newline
    out = tuned_yaml(
        src, {"engine.admission.age_reject_s": 17.3, "engine.scaling.target": "hpa"}, []
    )
    assert out == (
        "name: mine  # no engine at all\nduration_s: 60\n"
        "engine:\n  admission:\n    age_reject_s: 17.3\n  scaling:\n    target: hpa\n"
    )


def test_null_parent_becomes_a_flow_mapping() -> None:
    src = "engine:\n  scaling: null  # off\n  breaker:\n"
    out = tuned_yaml(src, {"engine.scaling.max_replicas": 7, "engine.breaker.open_s": 5}, [])
    assert out == "engine:\n  scaling: {max_replicas: 7}  # off\n  breaker: {open_s: 5}\n"


def test_list_index_replace_and_insert() -> None:
    src = "arrivals:\n  phases:\n    - {until_s: 20, rate_per_s: 2}\n    - until_s: 40\n"
    out = tuned_yaml(
        src, {"arrivals.phases.0.rate_per_s": 3.5, "arrivals.phases.1.rate_per_s": 1}, []
    )
    assert out == (
        "arrivals:\n  phases:\n    - {until_s: 20, rate_per_s: 3.5}\n"
        "    - until_s: 40\n      rate_per_s: 1\n"
    )


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ("name.sub", r"cannot set name\.sub: name is a scalar"),
        ("thresholds.x", r"thresholds\.x: no such list element"),
        ("thresholds.3", r"thresholds\.3: no such list element"),
        ("engine..x", "empty part"),
    ],
)
def test_errors_name_the_path(path: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tuned_yaml(BLOCK, {path: 1}, [])


ANCHORED = """\
classes:
  chat: &base
    weight: 0.5  # half
    max_tokens: 16
  other: *base
  more: [*base]
"""


def test_an_edit_under_an_anchor_writes_its_aliases_out_and_changes_that_place_only() -> None:
    out = tuned_yaml(ANCHORED, {"classes.chat.max_tokens": 32}, [])
    assert out == (
        "classes:\n  chat: &base\n    weight: 0.5  # half\n    max_tokens: 32\n"
        "  other: {weight: 0.5, max_tokens: 16}\n  more: [{weight: 0.5, max_tokens: 16}]\n"
    )
    data = yaml.safe_load(out)["classes"]
    assert data["other"] == data["more"][0] == {"weight": 0.5, "max_tokens": 16}


def test_an_edit_through_an_alias_writes_that_alias_out() -> None:
    out = tuned_yaml(ANCHORED, {"classes.other.max_tokens": 8}, [])
    assert "  other: {weight: 0.5, max_tokens: 8}\n  more: [*base]\n" in out
    data = yaml.safe_load(out)["classes"]
    assert data["chat"]["max_tokens"] == data["more"][0]["max_tokens"] == 16
    src = "a: &x {v: 1}\nb: *x\nn: &n 5\nm: *n\n"  # flow anchors and a scalar's
    out = tuned_yaml(src, {"b.v": 2, "n": 7}, [])
    assert out == "a: &x {v: 1}\nb: {v: 2}\nn: 7\nm: 5\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ("traces/b.csv", "traces/b.csv"),
        ("/abs/b.csv", "'/abs/b.csv'"),
        ("yes", "'yes'"),
        ("it's", "'it''s'"),
        ("two\nlines", '"two\\nlines"'),
    ],
)
def test_booleans_null_and_strings_are_written_as_they_load(value: object, text: str) -> None:
    src = "engine:\n  scaling: {enabled: true}\n  x: 1  # note\n"
    out = tuned_yaml(src, {"engine.x": value}, [])  # type: ignore[dict-item]
    assert out == src.replace("x: 1", f"x: {text}")
    assert yaml.safe_load(out)["engine"]["x"] == value


def test_a_mapping_or_list_set_to_one_value_replaces_its_text() -> None:
    src = "engine:\n  dependency:\n    a: 1  # gone\n    b: [1, 2]\n  other: 3\nl: [1, 2]\n"
    out = tuned_yaml(src, {"engine.dependency": None, "l": "off"}, [])  # a word YAML reads as false
    assert out == "engine:\n  dependency:\n    null\n  other: 3\nl: 'off'\n"
    assert yaml.safe_load(out) == {"engine": {"dependency": None, "other": 3}, "l": "off"}


def test_block_scalar_is_refused() -> None:
    src = "description: |\n  two\n  lines\nname: x\n"
    with pytest.raises(ValueError, match="block scalar"):
        tuned_yaml(src, {"description": "one"}, [])


def test_header_then_blank_line_then_users_comments() -> None:
    out = tuned_yaml(BLOCK, {"engine.admission.depth_mult": 3}, ["tuned by harness tune", ""])
    assert out.startswith("# tuned by harness tune\n#\n\n# my profile\nname: mine\n")
    assert out.endswith(BLOCK.replace("depth_mult: 2", "depth_mult: 3"))


def test_crlf_line_endings_are_kept() -> None:
    src = "name: x\r\nengine:\r\n  admission:\r\n    depth_mult: 2\r\n"
    out = tuned_yaml(src, {"engine.admission.age_reject_s": 5}, ["h"])
    assert out == "# h\r\n\r\n" + src + "    age_reject_s: 5\r\n"


CHANGES = {"engine.admission.age_reject_s": 17.3, "engine.scaling.max_replicas": 7}
OVERRIDES = [f"{k}={v}" for k, v in CHANGES.items()]


def _cut(line: str) -> str:
    return re.sub(r"(, )?(age_reject_s|max_replicas): [^,}\s]+", "", line)


def _no_lines(msg: str) -> str:
    return re.sub(r"<profile>:\d+:", "<profile>:", msg)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.relative_to(ROOT / "profiles").as_posix())
def test_bundled_profiles_round_trip(path: Path) -> None:
    src = path.read_text()
    out = tuned_yaml(src, CHANGES, ["tuned"])
    assert out.startswith("# tuned\n\n")
    body = out.removeprefix("# tuned\n\n")
    # only the tuned keys' text differs: with it cut out, the removed lines come back as the
    # added ones, apart from new lines that held only a tuned key or a parent created for it
    diff = list(difflib.ndiff(src.splitlines(), body.splitlines()))
    removed = [_cut(line[2:]) for line in diff if line.startswith("- ")]
    added = [_cut(line[2:]) for line in diff if line.startswith("+ ")]
    assert added
    assert [line for line in removed if line.strip()] == [
        line for line in added if line.strip() not in ("", "engine:", "admission:", "scaling:")
    ]
    data = yaml.safe_load(body)
    assert data["engine"]["admission"]["age_reject_s"] == 17.3
    assert data["engine"]["scaling"]["max_replicas"] == 7
    try:
        loads(src, overrides=OVERRIDES, base_dir=path.parent)
    except ProfileError as e:
        # e.g. executors.initial above the new ceiling: the tuned file fails the same way
        with pytest.raises(ProfileError) as got:
            loads(out, base_dir=path.parent)
        assert _no_lines(str(got.value)) == _no_lines(str(e))
        return
    prof = loads(out, base_dir=path.parent)
    assert prof.engine.admission.age_reject_s == 17.3
    assert prof.engine.scaling.max_replicas == 7


def test_edit_that_does_not_load_back_is_refused() -> None:
    # a duplicate key: the text edit lands on the first, the loader keeps the second
    with pytest.raises(ValueError, match=r"would change a unexpectedly"):
        tuned_yaml("a: 1\nb: 0\na: 2\n", {"a": 5}, [])
