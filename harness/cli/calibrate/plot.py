"""The token model's fit as a picture (``fit.png`` beside ``calibrated.yaml``).

Two panels: each request's TTFT against its prompt tokens, and its time per output token
against the requests in flight when it started, each with the fitted median line and the
model's central 95 % band (the line x exp(+-1.96 sigma): the jitter ``f = exp(N(0, sigma))``);
each panel's title carries its goodness figures. Plain data in (arrays and the figures of
``calibrated.json``), so this module needs neither the fit nor a driver. matplotlib is
imported inside the function, after selecting the Agg backend, as in ``plots.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.render.plots import pyplot

Z95 = 1.96  # the normal's two-sided 95 % point: the band is the model's central 95 %


def _panel(
    ax: Any,
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    line: tuple[float, float, float],
    sigma: float,
    good: Mapping[str, Any],
    xlabel: str,
    name: str,
    jitter: bool,
) -> None:
    """Scatter, median line ``a + b (x - shift)`` and its 95 % band; goodness in the title.
    ``jitter``: an integer predictor (in flight) is spread a little sideways, so the points
    at one level stay visible; the line and band are drawn at the true values."""
    a, b, shift = line
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    lo, hi = (float(xs.min()), float(xs.max())) if len(xs) else (0.0, 1.0)
    grid = np.linspace(lo, hi, 100)
    med = a + b * (grid - shift)
    spread = math.exp(Z95 * sigma)
    ax.fill_between(
        grid, med / spread, med * spread, color="#1f77b4", alpha=0.15, lw=0, label="95 % band"
    )
    dx = np.random.default_rng(0).uniform(-0.15, 0.15, len(xs)) if jitter else 0.0
    ax.scatter(xs + dx, ys, s=9, color="#333333", alpha=0.6, lw=0, label="observed")
    ax.plot(grid, med, color="#1f77b4", lw=2, label="fitted median")
    verdict = "ok" if good.get("ok") else "BAD FIT"
    ax.set_title(
        f"{name}: {verdict}\nKS {good['ks']:.3f} (limit {good['ks_limit']:.3f}), "
        f"bias {good['bias']:.3f} (limit {good['bias_limit']:.3f}), "
        f"R² {good['r2']:.2f}",
        fontsize=9,
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{name} (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")


def plot_fit(
    out: Path,
    *,
    prompt: npt.ArrayLike,
    ttft: npt.ArrayLike,
    in_flight: npt.ArrayLike,
    tpot: npt.ArrayLike,
    figures: Mapping[str, Any],
) -> Path:
    """Draw the fit; ``figures`` is calibrated.json's content (parameters, goodness, source)."""
    plt = pyplot()
    p = {k: float(v["value"]) for k, v in figures["parameters"].items()}
    good = figures["goodness"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
    _panel(
        left,
        prompt,
        ttft,
        line=(p["ttft_s"], p["ttft_per_prompt_token_s"], 0.0),
        sigma=p["sigma"],
        good=good["ttft"],
        xlabel="prompt tokens",
        name="TTFT",
        jitter=False,
    )
    _panel(
        right,
        in_flight,
        tpot,
        line=(p["tpot_s"], p["tpot_per_in_flight_s"], 1.0),
        sigma=p["sigma"],
        good=good["tpot"],
        xlabel="requests in flight at its start",
        name="time per output token",
        jitter=True,
    )
    src = figures["source"]
    where = str(src["where"])
    where = where if len(where) <= 60 else "..." + where[-57:]  # a long path keeps its end
    fig.suptitle(
        f"token model fit, {src['requests_fitted']} requests ({where})\n"
        f"TTFT = {p['ttft_s']:.3g} s + {p['ttft_per_prompt_token_s']:.3g} s x prompt "
        f"tokens;  TPOT = {p['tpot_s']:.3g} s + {p['tpot_per_in_flight_s']:.3g} s x "
        f"(in flight - 1);  sigma {p['sigma']:.3g}",
        fontsize=9,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
