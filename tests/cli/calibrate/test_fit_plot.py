"""`harness fit` draws the fit: fit.png beside calibrated.yaml, a real PNG (no pixel checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
from typer.testing import CliRunner

from harness.cli import app

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _records(n_batches: int, seed: int) -> list[dict[str, Any]]:
    """Batches of k requests started together (k in flight each), far apart, timed by a known
    token model: TTFT from the prompt, 15 equal gaps of the time per output token."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for j in range(n_batches):
        k = (1, 2, 4, 8)[j % 4]
        t = 100.0 * j
        for i in range(k):
            prompt = int(rng.choice([128, 512, 1024, 2048]))
            f = float(np.exp(rng.normal(0, 0.2)))
            ttft, tpot = f * (0.25 + 0.0002 * prompt), f * (0.012 + 0.0006 * (k - 1))
            out.append(
                {
                    "id": f"r-{j}-{i}",
                    "class": "chat",
                    "outcome": "completed",
                    "attempts": 1,
                    "t_intended": t,
                    "t_sent": t,
                    "t_end": t + ttft + 15 * tpot,
                    "queue_wait_s": None,
                    "ttft_s": ttft,
                    "itl_s": [tpot] * 15,
                    "tokens": {"prompt": prompt, "completion": 16},
                    "tokens_source": "usage",
                }
            )
    return out


def test_fit_writes_a_png_picture_of_the_fit_beside_the_calibrated_profile(tmp_path: Path) -> None:
    recs = _records(32, seed=1)  # 120 requests
    (tmp_path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    r = CliRunner().invoke(
        app, ["fit", str(tmp_path), "--profile", "token-model", "--resamples", "20"]
    )
    assert r.exit_code == 0, r.output
    png = tmp_path / "fit.png"
    assert (tmp_path / "calibrated.yaml").is_file() and png.is_file()
    data = png.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_SIGNATURE)
    assert "picture of the fit" in r.output
