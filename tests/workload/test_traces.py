"""Public LLM trace formats as arrivals (harness/traces.py): Azure, BurstGPT, mooncake JSONL.

Every file here is written by the test: well-formed ones replayed exactly (offsets, classes,
tokens, windows and rescales), malformed ones refused with file:line and the column, and the
CLI's exit 2 for them, without a traceback."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from harness.profile import Profile, ProfileError, loads, to_dict
from harness.sim.runner import simulate
from harness.workload.arrivals import schedule
from harness.workload.traces import azure_ticks

ROOT = Path(__file__).resolve().parents[2]
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BURST_HEAD = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def profile(
    file: Path,
    fmt: str,
    trace: str = "",
    *,
    duration: float = 1000,
    classes: str = "{a: {weight: 1}, b: {weight: 1}}",
) -> Profile:
    opts = f", trace: {trace}" if trace else ""
    return loads(
        f"""
name: traced
duration_s: {duration}
arrivals: {{process: trace, format: {fmt}, file: {file}{opts}}}
classes: {classes}
upstream: {{latency: {{dist: fixed, value_s: 0.5}}, timeout_s: 30}}
engine: {{executors: {{initial: 8}}}}
""",
        file="traced.yaml",
    )


def rows(p: Profile) -> list[tuple[float, str, int | None, int | None]]:
    return [(a.t, a.cls, a.prompt_tokens, a.output_tokens) for a in schedule(p)]


# -- the three formats, read exactly ----------------------------------------------------------


def test_azure_offsets_are_exact_to_the_seventh_digit(tmp_path: Path) -> None:
    stamps = [
        "2023-11-16 18:15:46.6805900",
        "2023-11-16 18:15:50.9951690",
        "2023-11-16 18:15:51.5483601",
        "2023-11-17 00:00:00.0000001",
    ]
    f = tmp_path / "az.csv"
    f.write_text(AZURE_HEAD + "".join(f"{s},{100 + i},{10 + i}\n" for i, s in enumerate(stamps)))
    got = rows(profile(f, "azure", duration=100_000))

    def exact(s: str) -> float:  # Decimal arithmetic on the text: the one rounding is to float
        day, clock = s.split(" ")
        h, m, sec = clock.split(":")
        d0 = datetime.fromisoformat(stamps[0][:19]).date()
        days = (datetime.fromisoformat(day).date() - d0).days
        first = (
            Decimal(stamps[0][11:13]) * 3600
            + Decimal(stamps[0][14:16]) * 60
            + Decimal(stamps[0][17:])
        )
        return float(days * 86400 + Decimal(h) * 3600 + Decimal(m) * 60 + Decimal(sec) - first)

    assert [t for t, *_ in got] == [exact(s) for s in stamps]
    assert got[1][0] == 4.314579 and got[2][0] == 4.8677701
    assert [(p, o) for _t, _c, p, o in got] == [(100, 10), (101, 11), (102, 12), (103, 13)]
    assert {c for _t, c, *_ in got} == {"a"}  # no mapping: the profile's first class


def test_azure_timestamps_parse_fractions_and_zones_exactly() -> None:
    base = azure_ticks("2024-05-10 00:00:00")
    assert azure_ticks("2024-05-10 00:00:00.0000001") - base == 1
    assert azure_ticks("2024-05-10 00:00:00.00993") - base == 99_300
    assert azure_ticks("2024-05-10 02:00:00.5+02:00") - base == 5_000_000
    assert azure_ticks("2024-05-11T00:00:00Z") - base == 86_400 * 10_000_000
    for bad in (
        "2024-02-30 00:00:00",
        "2024-05-10 24:00:00",
        "18:15:46",
        "2024-05-10 00:00:00.12345678",
    ):
        with pytest.raises(ValueError):
            azure_ticks(bad)


def test_burstgpt_rows_map_by_model_and_by_log_type(tmp_path: Path) -> None:
    f = tmp_path / "bg.csv"
    f.write_text(
        BURST_HEAD + "5,ChatGPT,472,18,490,Conversation log\n"
        "45.5,ChatGPT,1087,284,1371,API log\n118,GPT-4,417,0,417,Conversation log\n"
    )
    by_model = profile(f, "burstgpt", "{classes: {by: model, map: {ChatGPT: a, GPT-4: b}}}")
    assert rows(by_model) == [(0.0, "a", 472, 18), (40.5, "a", 1087, 284), (113.0, "b", 417, 0)]
    by_log = profile(
        f, "burstgpt", "{classes: {by: log_type, map: {Conversation log: b, API log: a}}}"
    )
    assert [c for _t, c, *_ in rows(by_log)] == ["b", "a", "b"]


def test_mooncake_jsonl_milliseconds_and_ignored_keys(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    f.write_text(
        '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [1, 2]}\n'
        '\n{"timestamp": 30535, "input_length": 6472, "output_length": 26}\n'
        '{"output_length": 5, "timestamp": 31000.5, "input_length": 100}\n'
    )
    assert rows(profile(f, "mooncake")) == [
        (0.0, "a", 6955, 52),
        (3.053, "a", 6472, 26),
        (3.5185, "a", 100, 5),
    ]


def test_classes_by_prompt_tokens_use_the_bins_upper_bounds(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    f.write_text(
        "".join(
            json.dumps({"timestamp": i, "input_length": n, "output_length": 1}) + "\n"
            for i, n in enumerate([10, 1000, 1001, 50_000])
        )
    )
    p = profile(
        f,
        "mooncake",
        "{classes: {by: prompt_tokens, bins: [{max: 1000, class: b}, {max: null, class: a}]}}",
    )
    assert [c for _t, c, *_ in rows(p)] == ["b", "b", "a", "a"]
    capped = profile(f, "mooncake", "{classes: {by: prompt_tokens, bins: [{max: 1000, class: b}]}}")
    with pytest.raises(ProfileError) as e:
        rows(capped)
    assert f"{f}:3: input_length: 1001 prompt tokens is past the last bin" in str(e.value)


# -- windows and rescaling --------------------------------------------------------------------


def _bursty_azure(path: Path, n: int = 400, seed: int = 7) -> list[tuple[float, int, int]]:
    """A file of ``n`` rows at irregular times; returns (offset_s, prompt, output) per row."""
    rng = random.Random(seed)
    t0 = datetime(2023, 11, 16, 18, 15, 46, 680590)
    lines, out, t = [], [], 0
    for _ in range(n):
        t += rng.choice([0, 1, 37, 5_000, 2_500_000, 9_999_999, 31_000_000])  # 100 ns ticks
        p, o = rng.randrange(1, 8000), rng.randrange(0, 900)
        stamp = t0 + timedelta(microseconds=t // 10)
        lines.append(f"{stamp:%Y-%m-%d %H:%M:%S}.{stamp.microsecond:06d}{t % 10},{p},{o}\n")
        out.append((t, p, o))
    path.write_text(AZURE_HEAD + "".join(lines))
    return [((t - out[0][0]) / 1e7, p, o) for t, p, o in out]  # offsets from the first row


def test_a_window_replayed_in_sim_has_exactly_the_files_arrivals_and_tokens(tmp_path: Path) -> None:
    f = tmp_path / "az.csv"
    table = _bursty_azure(f)
    lo, hi = 100.0, 900.0
    inside = [(t, p, o) for t, p, o in table if lo <= t < hi]
    assert 50 < len(inside) < len(table)
    p = profile(f, "azure", f"{{window_s: [{lo}, {hi}]}}", duration=hi - lo)
    got = rows(p)
    assert [t for t, *_ in got] == pytest.approx([t - lo for t, _p, _o in inside], abs=1e-9)
    result = simulate(p)
    s = result.summary
    assert s["counts"]["arrivals"] == len(inside)
    assert s["trace"] == {
        "arrivals": len(inside),
        "prompt_tokens": sum(x[1] for x in inside),
        "output_tokens": sum(x[2] for x in inside),
    }
    assert s["effective"]["arrivals"]["format"] == "azure"


def test_speedup_divides_times_and_rate_per_s_sets_the_mean_rate(tmp_path: Path) -> None:
    f = tmp_path / "az.csv"
    _bursty_azure(f)
    plain = [t for t, *_ in rows(profile(f, "azure", duration=100_000))]
    fast = rows(profile(f, "azure", "{speedup: 4}", duration=100_000))
    assert [t for t, *_ in fast] == pytest.approx([t / 4 for t in plain], rel=1e-12)
    assert len(fast) == len(plain)  # nothing is thinned
    for rate in (0.5, 3.0, 40.0):
        got = [
            t for t, *_ in rows(profile(f, "azure", f"{{rate_per_s: {rate}}}", duration=100_000))
        ]
        assert len(got) == len(plain)
        assert len(got) / got[-1] == pytest.approx(rate, rel=1e-9)  # rows / first-to-last span
        assert [t / got[-1] for t in got] == pytest.approx([t / plain[-1] for t in plain])
    win = rows(profile(f, "azure", "{window_s: [0, 1000], rate_per_s: 2}", duration=100_000))
    n = sum(1 for t in plain if t < 1000)
    assert len(win) == n and max(t for t, *_ in win) < n / 2  # the window's 1000 s became n/2 s


def test_duration_cuts_the_rescaled_trace_and_the_totals_follow(tmp_path: Path) -> None:
    f = tmp_path / "bg.csv"
    f.write_text(
        BURST_HEAD + "".join(f"{i * 10},ChatGPT,{i},{2 * i},{3 * i},API log\n" for i in range(10))
    )
    p = profile(f, "burstgpt", "{speedup: 2}", duration=20)  # offsets 0, 5, 10, 15 stay
    s = simulate(p).summary
    assert s["trace"] == {"arrivals": 4, "prompt_tokens": 0 + 1 + 2 + 3, "output_tokens": 12}


def test_plain_runs_keep_their_summary_and_effective_profile() -> None:
    from tests.conftest import BASE

    p = loads(BASE)
    assert to_dict(p)["arrivals"]["format"] == "csv"
    assert to_dict(p)["arrivals"]["trace"] is None
    assert "trace" not in simulate(p).summary


def test_the_csv_reader_leaves_tokens_unset(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("t,class\n0.5,b\n1,\n")
    p = loads(
        f"name: t\nduration_s: 10\narrivals: {{process: trace, file: {f}}}\n"
        "classes: {a: {weight: 1}, b: {weight: 1}}\n"
    )
    assert [(a.prompt_tokens, a.output_tokens) for a in schedule(p)] == [(None, None)] * 2
    assert "trace" not in simulate(p).summary


# -- malformed rows and wrong formats ---------------------------------------------------------

MALFORMED = [
    (
        "azure",
        "x.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n2023-11-16 18:15:4x.2,1,2\n",
        3,
        "TIMESTAMP",
    ),
    (
        "azure",
        "x.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n2023-11-16 18:15:47.2,many,2\n",
        3,
        "ContextTokens",
    ),
    ("azure", "x.csv", AZURE_HEAD + "2023-11-16 18:15:46.1,1,-2\n", 2, "GeneratedTokens"),
    (
        "azure",
        "x.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n2023-11-16 18:15:45.1,1,2\n",
        3,
        "TIMESTAMP",
    ),
    (
        "burstgpt",
        "x.csv",
        BURST_HEAD + "1,ChatGPT,1,2,3,API log\n2,ChatGPT,1\n",
        3,
        "Response tokens",
    ),
    (
        "burstgpt",
        "x.csv",
        BURST_HEAD + "1,ChatGPT,1,2,3,API log\nsoon,ChatGPT,1,2,3,API log\n",
        3,
        "Timestamp",
    ),
    (
        "mooncake",
        "x.jsonl",
        (
            '{"timestamp": 1, "input_length": 2, "output_length": 3}\n{"timestamp": 2,'
            ' "input_length": 2}\n'
        ),
        2,
        "output_length",
    ),
    (
        "mooncake",
        "x.jsonl",
        '{"timestamp": 1, "input_length": 2, "output_length": 3}\n{"timestamp": 2,\n',
        2,
        "timestamp",
    ),
    (
        "mooncake",
        "x.jsonl",
        '{"timestamp": 1, "input_length": 2.5, "output_length": 3}\n',
        1,
        "input_length",
    ),
]


@pytest.mark.parametrize(("fmt", "name", "text", "line", "column"), MALFORMED)
def test_a_malformed_row_names_file_line_and_column(
    tmp_path: Path, fmt: str, name: str, text: str, line: int, column: str
) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ProfileError) as e:
        rows(profile(f, fmt))
    assert str(e.value).startswith(f"{f}:{line}: {column}: "), str(e.value)


def test_an_unmapped_model_names_its_line(tmp_path: Path) -> None:
    f = tmp_path / "bg.csv"
    f.write_text(BURST_HEAD + "1,ChatGPT,1,2,3,API log\n2,Claude,1,2,3,API log\n")
    with pytest.raises(ProfileError) as e:
        rows(profile(f, "burstgpt", "{classes: {by: model, map: {ChatGPT: a}}}"))
    assert str(e.value).startswith(f"{f}:3: Model: no class for model 'Claude'")


WRONG = [
    (
        "azure",
        "bg.csv",
        BURST_HEAD + "1,ChatGPT,1,2,3,API log\n",
        "expected an Azure",
        "format: burstgpt?",
    ),
    (
        "burstgpt",
        "az.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n",
        "expected a BurstGPT",
        "format: azure?",
    ),
    (
        "mooncake",
        "az.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n",
        "expected mooncake-style JSONL",
        "format: azure?",
    ),
    (
        "azure",
        "mc.jsonl",
        '{"timestamp": 1, "input_length": 2, "output_length": 3}\n',
        "expected an Azure",
        "format: mooncake?",
    ),
    ("burstgpt", "t.csv", "t,class\n1,a\n", "expected a BurstGPT", "format: csv?"),
    (
        "csv",
        "az.csv",
        AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n",
        "needs a header with a 't' column",
        "format: azure?",
    ),
]


@pytest.mark.parametrize(("fmt", "name", "text", "expected", "guess"), WRONG)
def test_a_file_in_another_format_says_what_was_expected(
    tmp_path: Path, fmt: str, name: str, text: str, expected: str, guess: str
) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ProfileError) as e:
        rows(profile(f, fmt))
    msg = str(e.value)
    assert msg.startswith(f"{f}:1: ") and expected in msg and guess in msg, msg


BAD_OPTIONS = [
    ("azure", "{speedup: 2, rate_per_s: 3}", "arrivals.trace.rate_per_s", "not both"),
    ("azure", "{window_s: [5, 1]}", "arrivals.trace.window_s", "start < end"),
    ("azure", "{window_s: [1, 2, 3]}", "arrivals.trace.window_s", "[start, end]"),
    ("azure", "{speedup: 0}", "arrivals.trace.speedup", "must be > 0"),
    (
        "azure",
        "{classes: {by: model, map: {x: a}}}",
        "arrivals.trace.classes.by",
        "no model column",
    ),
    (
        "burstgpt",
        "{classes: {by: model, map: {x: nope}}}",
        "arrivals.trace.classes.map.x",
        "unknown class",
    ),
    (
        "burstgpt",
        "{classes: {by: prompt_tokens, bins: [{max: 9, class: a}, {max: 9, class: b}]}}",
        "arrivals.trace.classes.bins.1.max",
        "must rise",
    ),
    (
        "burstgpt",
        "{classes: {by: prompt_tokens, bins: [{max: null, class: a}, {max: 9, class: b}]}}",
        "arrivals.trace.classes.bins.0.max",
        "only the last",
    ),
    (
        "burstgpt",
        "{classes: {by: prompt_tokens, bins: [{max: 9, klass: a}]}}",
        "arrivals.trace.classes.bins.0.klass",
        "unknown key",
    ),
    ("burstgpt", "{classes: {by: prompt_tokens}}", "arrivals.trace.classes.bins", "needs bins"),
    ("csv", "{speedup: 2}", "arrivals.trace", "csv reader takes none"),
]


@pytest.mark.parametrize(("fmt", "trace", "field", "words"), BAD_OPTIONS)
def test_bad_trace_options_are_refused_at_load(
    tmp_path: Path, fmt: str, trace: str, field: str, words: str
) -> None:
    f = tmp_path / "any.csv"
    f.write_text("t\n")
    with pytest.raises(ProfileError) as e:
        profile(f, fmt, trace)
    assert e.value.field_path == field and words in str(e.value) and e.value.line == 4, str(e.value)


def test_a_format_needs_process_trace() -> None:
    from tests.conftest import BASE

    with pytest.raises(ProfileError) as e:
        loads(BASE, overrides=["arrivals.format=azure"])
    assert e.value.field_path == "arrivals.format"


# -- the CLI ----------------------------------------------------------------------------------


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_sim_of_a_malformed_trace_exits_2_without_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "az.csv"
    f.write_text(AZURE_HEAD + "2023-11-16 18:15:46.1,1,2\n2023-11-16 18:15:47.1,1,two\n")
    prof = tmp_path / "p.yaml"
    prof.write_text(
        f"name: p\nduration_s: 10\narrivals: {{process: trace, format: azure, file: {f}}}\n"
        "classes: {a: {weight: 1}}\n"
    )
    out = tmp_path / "out"
    res = _harness("sim", str(prof), "--out", str(out), "--no-report")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert f"{f}:3: GeneratedTokens: bad trace row" in res.stderr.replace("\n", "")
    assert not (out / "summary.json").exists()
    res = _harness("validate", str(prof))
    assert res.returncode == 2 and f"{f}:3: GeneratedTokens" in res.stderr.replace("\n", "")


def test_cli_sim_of_a_good_trace_writes_the_token_totals(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    f.write_text(
        "".join(
            json.dumps({"timestamp": 500 * i, "input_length": 10 * i, "output_length": i}) + "\n"
            for i in range(8)
        )
    )
    prof = tmp_path / "p.yaml"
    prof.write_text(
        f"name: p\nduration_s: 60\narrivals: {{process: trace, format: mooncake, file: {f}}}\n"
        "classes: {a: {weight: 1}}\nupstream: {latency: {dist: fixed, value_s: 1}}\n"
    )
    out = tmp_path / "out"
    res = _harness("sim", str(prof), "--out", str(out), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["trace"] == {"arrivals": 8, "prompt_tokens": 280, "output_tokens": 28}


def test_the_effective_profile_round_trips_for_live_runs(tmp_path: Path) -> None:
    """A live run ships the effective profile as YAML (live/calls.py): the options survive."""
    import yaml

    f = tmp_path / "mc.jsonl"
    f.write_text('{"timestamp": 1, "input_length": 2, "output_length": 3}\n')
    p = profile(
        f,
        "mooncake",
        "{window_s: [0, 10], rate_per_s: 2, classes: {by: prompt_tokens, "
        "bins: [{max: 5, class: b}, {max: null, class: a}]}}",
    )
    again = loads(yaml.safe_dump(to_dict(p), sort_keys=False), file="again.yaml")
    assert again.arrivals == p.arrivals
