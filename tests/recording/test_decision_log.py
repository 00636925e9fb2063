"""decisions.jsonl: the encoder writes orjson's bytes for every record, and `--log zstd|gzip`
writes the same bytes compressed, which report, compare, zstdcat, gzip and DuckDB/Polars read."""

from __future__ import annotations

import io
import random
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
from librt.strings import BytesWriter
from typer.testing import CliRunner

from harness.cli import app
from harness.engine.events import Action, Admit, Dispatch, Expire, Reject
from harness.profile import load
from harness.recording import recorder
from harness.recording.logsink import LOG_NAMES, BlockWriter, find_decisions, read_decisions
from harness.recording.recorder import DecisionLog, record
from harness.sim.runner import run_to_folder

LIMITS = (("age_reject_s", 25.0), ("depth_mult", 2.0), ("max_queue_depth", 60))


def _log_bytes(t: float, actions: list[Action]) -> bytes:
    buf = io.BytesIO()
    log = DecisionLog(buf)
    log.write(t, actions)
    log.flush()
    return buf.getvalue()


def _orjson_bytes(t: float, actions: list[Action]) -> bytes:
    t = int(t * 1e6 + 0.5) / 1e6
    recs = [record(t, a) for a in actions]
    return b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in recs if r)


def test_rounded_floats_are_written_as_orjson_writes_them() -> None:
    rng = random.Random(7)
    ns = [*range(0, 20_000), *(rng.randrange(10**k) for k in range(1, 18) for _ in range(300))]
    ns += [10**15 - 1, 10**15, 10**15 + 1, 10**16, -1, -1000]
    for n in ns:
        us = BytesWriter()
        recorder._put_us(us, n)
        assert us.getvalue() == orjson.dumps(n / 1e6), n
    xs = [n / 1000.0 for n in ns] + [n / 1000.0 + 0.0004999 for n in ns[:20_000]]
    xs += [rng.uniform(0, 10.0**k) for k in range(-4, 16) for _ in range(300)]
    xs += [-0.0, -0.0004, -0.0006, -3.5, 1e12 - 1e-3, 1e12, 1e12 + 1, 2e16, 0.0005, 0.0015]
    for x in xs:
        ms = BytesWriter()
        recorder._put_ms(ms, x)
        assert ms.getvalue() == orjson.dumps(int(x * 1000.0 + 0.5) / 1000.0), x


def test_raw_floats_and_strings_are_written_as_orjson_writes_them() -> None:
    rng = random.Random(8)
    xs = [0.0, -0.0, 1e-4, 9.999e-5, 1e16, 9.99e15, 1e-300, 5e-324, 1.7e308, float("nan")]
    xs += [float("inf"), -2.5, 0.1 + 0.2]
    xs += [rng.uniform(0, 10 ** rng.randrange(-6, 18)) for _ in range(5000)]
    for x in xs:
        assert recorder._float(x) == orjson.dumps(x), x
    for s in ["r-000001", "", 'a"b', "a\\b", "tab\there", "del\x7f", "ünï", "日本", "\x00", "~ !"]:
        assert b'"' + recorder._inner(s) + b'"' == orjson.dumps(s), s
        # An id is written into the line character by character (compiled), cut back to
        # where it began at the first character JSON escapes.
        w = BytesWriter()
        w.write(b'{"id":"')
        recorder.DecisionLog(io.BytesIO()).put_id(w, s + "-tail")
        assert w.getvalue() == b'{"id":' + orjson.dumps(s + "-tail")[:-1], s


def _admission(kind: type, i: int, rng: random.Random, limits: tuple[object, ...]) -> Action:
    fields = dict(
        id=rng.choice([f"r-{i:06d}", f'q"{i}', f"ü-{i}", f"t\\{i}", f"d\x7f{i}", f"c\x01{i}", ""]),
        cls=rng.choice(["large", "small", "ß"]),
        priority=rng.randrange(3),
        tenant=rng.choice(["default", "acme", 'x"y']),
        estimated_wait_s=rng.choice([0.0, rng.uniform(0, 100), rng.uniform(0, 1e-3)]),
        depth=rng.choice([0, rng.randrange(5000)]),
        age_s=rng.choice([0.0, rng.uniform(0, 40)]),
        in_flight=rng.randrange(2000),
        concurrency=rng.choice([400, 1500]),
        service_time_s=rng.uniform(0, 30),
        deadline_s=rng.choice([None, 12.0, rng.uniform(0, 1e-4), rng.uniform(0, 99)]),
        limits=limits,
    )
    if kind is Reject:
        return Reject(
            reason=rng.choice(["queue_age", "queue_depth"]),
            retry_after_s=rng.choice([0.0, 1e-5, rng.uniform(0, 30), 2e16]),
            **fields,  # type: ignore[arg-type]
        )
    return Admit(reason=rng.choice([None, "admit_always"]), **fields)  # type: ignore[arg-type]


def test_every_line_is_orjsons_dump_of_its_record() -> None:
    rng = random.Random(9)
    for limits in [LIMITS, (), (("tenant_burst", 3), ("tenant_rate_per_s", 0.5))]:
        actions: list[Action] = []
        for i in range(600):
            kind = rng.choice([Admit, Reject, Reject, Dispatch, Expire])
            if kind is Dispatch:
                actions.append(
                    Dispatch(
                        id=f"r-{i}",
                        cls="a",
                        attempt=rng.choice([1, 2, 1200]),
                        queue_wait_s=rng.choice([0.0, 5e-5, rng.uniform(0, 50)]),
                    )
                )
            elif kind is Expire:
                actions.append(Expire(id=f"r-{i}", age_s=3.2, limit_s=3.0, reason="deadline"))
            else:
                actions.append(_admission(kind, i, rng, limits))
        for t in [0.0, 0.00004, 1.5, 3599.123456789, 1e10]:
            assert _log_bytes(t, actions) == _orjson_bytes(t, actions)


def _profile(extra: list[str] | None = None):  # type: ignore[no-untyped-def]
    return load("seed-burst", extra or [])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("logs")
    prof = _profile()
    out = {}
    for fmt in ("plain", "zstd", "gzip"):
        run_to_folder(prof, 3, base / fmt, log_format=fmt)
        out[fmt] = base / fmt
    return out


def test_compressed_logs_hold_exactly_the_plain_logs_bytes(runs: dict[str, Path]) -> None:
    plain = (runs["plain"] / "decisions.jsonl").read_bytes()
    assert plain.count(b"\n") > 100
    for fmt, name in [("zstd", "decisions.jsonl.zst"), ("gzip", "decisions.jsonl.gz")]:
        path = runs[fmt] / name
        assert find_decisions(runs[fmt]) == path
        assert not (runs[fmt] / "decisions.jsonl").exists()
        assert read_decisions(path) == plain
        assert len(path.read_bytes()) < len(plain) / 5
    assert read_decisions(runs["plain"] / "decisions.jsonl") == plain


@pytest.mark.skipif(shutil.which("zstd") is None, reason="zstd is not installed")
def test_zstdcat_reads_the_zstd_log(runs: dict[str, Path]) -> None:
    out = subprocess.run(
        ["zstd", "-dc", str(runs["zstd"] / "decisions.jsonl.zst")], capture_output=True, check=True
    )
    assert out.stdout == (runs["plain"] / "decisions.jsonl").read_bytes()


@pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip is not installed")
def test_gzip_reads_the_gzip_log(runs: dict[str, Path]) -> None:
    out = subprocess.run(
        ["gzip", "-dc", str(runs["gzip"] / "decisions.jsonl.gz")], capture_output=True, check=True
    )
    assert out.stdout == (runs["plain"] / "decisions.jsonl").read_bytes()


def test_duckdb_or_polars_reads_the_compressed_logs(runs: dict[str, Path]) -> None:
    plain = (runs["plain"] / "decisions.jsonl").read_bytes()
    kinds = sorted(set(orjson.loads(line)["kind"] for line in plain.splitlines()))
    n = plain.count(b"\n")
    for path in (runs["zstd"] / "decisions.jsonl.zst", runs["gzip"] / "decisions.jsonl.gz"):
        try:
            import duckdb
        except ImportError:
            polars = pytest.importorskip("polars", reason="neither duckdb nor polars installed")
            df = polars.read_ndjson(path)
            assert df.height == n and sorted(df["kind"].unique().to_list()) == kinds
            continue
        rows = duckdb.sql(
            f"select kind, count(*) from read_json('{path}', format='newline_delimited') "
            "group by kind order by kind"
        ).fetchall()
        assert [k for k, _ in rows] == kinds and sum(c for _, c in rows) == n


def test_sim_log_option_writes_the_named_file_and_report_and_compare_read_it(
    tmp_path: Path,
) -> None:
    cli = CliRunner()
    args = ["sim", "seed-burst", "--seed", "4"]
    for fmt in ("zstd", "gzip"):
        r = cli.invoke(app, [*args, "--out", str(tmp_path / fmt), "--log", fmt, "--no-report"])
        assert r.exit_code in (0, 1), r.output
    r = cli.invoke(app, [*args, "--out", str(tmp_path / "plain"), "--no-report"])
    assert r.exit_code in (0, 1), r.output
    assert sorted(p.name for p in tmp_path.glob("*/decisions*")) == [
        "decisions.jsonl",
        "decisions.jsonl.gz",
        "decisions.jsonl.zst",
    ]
    plain = (tmp_path / "plain" / "decisions.jsonl").read_bytes()
    assert read_decisions(tmp_path / "zstd" / "decisions.jsonl.zst") == plain
    assert read_decisions(tmp_path / "gzip" / "decisions.jsonl.gz") == plain
    r = cli.invoke(app, ["report", str(tmp_path / "zstd")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "zstd" / "report.md").is_file()
    r = cli.invoke(app, ["compare", str(tmp_path / "zstd"), str(tmp_path / "gzip")])
    # one run under two log formats: nothing changed; exit 4 as seed-burst misses its own SLO
    assert r.exit_code == 4 and "no detectable change" in r.output, r.output
    r = cli.invoke(app, [*args, "--out", str(tmp_path / "bad"), "--log", "bzip2"])
    assert r.exit_code == 2


def test_log_off_writes_no_log_and_the_summary_and_report_say_so(tmp_path: Path) -> None:
    cli = CliRunner()
    out = tmp_path / "off"
    args = ["sim", "seed-burst", "--seed", "4", "--out", str(out)]
    r = cli.invoke(app, [*args, "--no-report"])  # an earlier run's plain log ...
    assert r.exit_code in (0, 1) and (out / "decisions.jsonl").is_file(), r.output
    r = cli.invoke(app, [*args, "--log", "off"])
    assert r.exit_code in (0, 1), r.output
    assert find_decisions(out) is None  # ... is removed: no log of this run is left
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["meta"]["decision_log"] is None
    assert "decision log" in r.output and "none written (--log off)" in r.output
    assert "decision log: none written (--log off)" in (out / "report.md").read_text()
    r = cli.invoke(app, ["report", str(out)])
    assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["compare", str(out), str(out), "--seeds", "2", "--jobs", "1"])
    # exit 4: nothing worse than itself, but seed-burst's own verdict does not hold (its
    # AGE_REJECT misses the SLO)
    assert r.exit_code == 4 and isinstance(r.exception, SystemExit | None), r.output
    r = cli.invoke(app, [*args, "--log", "off", "--seeds", "2", "--no-report"])
    assert r.exit_code in (0, 1), r.output
    assert not list(out.glob("seed-*/decisions*")) and list(out.glob("seed-*/summary.json"))
    plain = orjson.loads((tmp_path / "off" / "seed-4" / "summary.json").read_bytes())
    assert plain["meta"]["decision_log"] is None


def test_the_default_log_is_plain_and_named_in_the_summary(runs: dict[str, Path]) -> None:
    for fmt, name in LOG_NAMES.items():
        assert (
            orjson.loads((runs[fmt] / "summary.json").read_bytes())["meta"]["decision_log"] == name
        )


def test_log_none_is_refused_with_a_hint_naming_plain_and_off(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["sim", "seed-burst", "--out", str(tmp_path), "--log", "none"])
    assert r.exit_code == 2, r.output
    said = r.output.strip()
    assert said.startswith("error: --log none is no longer accepted") and "\n" not in said
    assert "--log plain" in said and "--log off" in said
    assert not (tmp_path / "summary.json").exists()


def test_a_failing_disk_is_raised_by_the_writer_thread(tmp_path: Path) -> None:
    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b: object) -> int:
            raise OSError(28, "No space left on device")

    w = BlockWriter(Full(), "zstd")  # type: ignore[arg-type]
    w.write(b"x" * 100_000)
    with pytest.raises(OSError, match="No space"):
        w.close()
