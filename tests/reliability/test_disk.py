"""Disk and I/O faults: a results folder that cannot be written, full at the start, full mid-run.

Deterministic and mount-free: ``RLIMIT_FSIZE`` in the child with SIGXFSZ ignored (a write past
the limit fails with EFBIG, root included), a path under a regular file (ENOTDIR), and a
read-only folder where the tests do not run as root (root ignores the mode bits). Every case
ends with exit 3 and one line naming the path and the OS error, never a traceback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.reliability.support import (
    SLOW,
    assert_no_traceback,
    finish,
    fsize_limit,
    harness,
    ready_url,
    summary,
)
from tests.reliability.test_signals import _stub

pytestmark = [pytest.mark.slow]


def _cli(args: list[str], tmp_path: Path, limit: int | None = None) -> tuple[int, str]:
    """The CLI's exit code and output (through a pipe: the file-size limit would cut a log
    file short too)."""
    env = {**os.environ, "COLUMNS": "300"}
    res = subprocess.run(
        harness(*args),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        preexec_fn=fsize_limit(limit) if limit is not None else None,
    )
    return res.returncode, res.stdout + res.stderr


def test_sim_into_a_path_under_a_file_is_exit_3_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out"
    rc, text = _cli(["sim", "smoke", "--out", str(out)], tmp_path)
    assert rc == 3, text
    assert_no_traceback(text)
    assert "Not a directory" in text and "file" in text


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_sim_into_a_read_only_folder_is_exit_3(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    rc, text = _cli(["sim", "smoke", "--out", str(ro / "out")], tmp_path)
    assert rc == 3 and "Permission denied" in text, text
    assert_no_traceback(text)


@pytest.mark.parametrize("command", ["sim", "sweep", "run"])
def test_a_full_disk_at_the_start_fails_fast(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    args = {
        "sim": ["sim", "smoke"],
        "sweep": [
            "sweep",
            "smoke",
            "--param",
            "engine.admission.age_reject_s=2:4:2",
            "--seeds",
            "2",
            "--jobs",
            "1",
        ],
        "run": ["run", "smoke", "--time-scale", "0.25"],
    }[command]
    rc, text = _cli([*args, "--out", str(out)], tmp_path, limit=0)
    assert rc == 3, text
    assert_no_traceback(text)
    assert "File too large" in text and str(out) in text
    assert not (out / "logs").exists(), "no load started"


def test_sim_full_mid_run_is_exit_3(tmp_path: Path) -> None:
    # Room for the probe and the first decisions, not for the whole decision log.
    rc, text = _cli(
        ["sim", "seed-burst", "--out", str(tmp_path / "out")], tmp_path, limit=64 * 1024
    )
    assert rc == 3, text
    assert_no_traceback(text)
    assert "File too large" in text and str(tmp_path / "out") in text


def test_report_on_a_full_disk_is_exit_3(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc, text = _cli(["sim", "smoke", "--out", str(out), "--no-report"], tmp_path)
    assert rc in (0, 1), text
    rc, text = _cli(["report", str(out)], tmp_path, limit=0)
    assert rc == 3, text
    assert_no_traceback(text)


def test_the_proxy_on_a_disk_that_fills_stops_and_says_what_was_lost(tmp_path: Path) -> None:
    stub, stub_url, _ = _stub(tmp_path, "--latency-s", "0")
    out, log = tmp_path / "proxy-out", tmp_path / "proxy.log"
    ready = tmp_path / "proxy-ready.json"  # the port the proxy chose (one chosen here could go)
    with log.open("wb") as fh:  # the proxy's output through a pipe: the limit is its own
        proc = subprocess.Popen(
            harness(
                "proxy",
                "--upstream",
                stub_url,
                "--port",
                "0",
                "--ready-file",
                str(ready),
                "--out",
                str(out),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=fsize_limit(48 * 1024),
        )
        tee = subprocess.Popen(["cat"], stdin=proc.stdout, stdout=fh)
    try:
        url = ready_url(ready, proc, log, "proxy")
        sent = 0
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        with httpx.Client(timeout=10) as client:
            while proc.poll() is None and sent < 2000:  # ~250 bytes of decisions per request
                try:
                    client.post(f"{url}/v1/chat/completions", json=body)
                except httpx.HTTPError:
                    break
                sent += 1
        rc = finish(proc, 60)
        finish(tee, 10)
    finally:
        stub.terminate()
        finish(stub, 20)
    text = log.read_text()
    assert rc == 3, text
    assert "Task exception was never retrieved" not in text
    assert_no_traceback(text)
    assert "File too large" in text and "lost:" in text
    # The decision log ends on a whole line: what is there is readable.
    data = (out / "decisions.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= 48 * 1024
    s = summary(out)  # small enough to fit under the limit: written, and honest
    assert s["complete"] is False and s["verdict"] == "invalid"
    assert s["lost"]["decisions"] >= 0 and s["io_error"]["errno"] is not None


def test_run_full_mid_run_stops_the_load_and_exits_3(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(SLOW)
    out = tmp_path / "out"
    rc, text = _cli(
        ["run", str(prof), "--time-scale", "0.25", "--out", str(out)], tmp_path, limit=40 * 1024
    )
    assert rc == 3, text
    assert_no_traceback(text)
    # The generator's records or the proxy's decisions fill first; either way the run stops
    # early, says which part stopped and that its summary could not be written.
    assert "stopped" in text and "File too large" in text and str(out) in text
    assert "--recover" in text and any(out.glob(".live-*/requests.jsonl"))


def test_results_files_take_the_umask_not_a_private_mode(tmp_path: Path) -> None:
    """mkstemp creates 0600 files; results are written for others to read (umask applies)."""
    from harness.ground.atomic import write_atomic

    mask = os.umask(0o022)
    os.umask(mask)
    write_atomic(tmp_path / "summary.json", b"{}\n")
    assert (tmp_path / "summary.json").stat().st_mode & 0o777 == 0o666 & ~mask
