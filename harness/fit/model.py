"""The token model's fit: parameters, confidence intervals, goodness of fit.

The model (``harness.profile.schema.upstream``): one jitter ``f = exp(N(0, sigma))`` per attempt
multiplies both ``ttft = f (ttft_s + ttft_per_prompt_token_s x prompt)`` and
``tpot = f (tpot_s + tpot_per_in_flight_s x (in_flight - 1))``. So ``log y = log(a + b x) +
e`` for each component, and the fit is least squares in log space: each component's line
(Gauss-Newton from the ordinary least-squares line, both parameters kept >= 0, as the schema
requires), which estimates the *median* model, as f has median 1; then both lines jointly,
each request's two residuals weighted by the inverse of their covariance (seemingly unrelated
regressions: the shared jitter cancels in their difference, see ``_joint``). ``sigma`` is the
root mean square of both components' log residuals pooled (the model has one jitter).

Confidence intervals: 95 % percentile bootstrap over requests (a request's TTFT and TPOT stay
together), seeded, so the same records give the same intervals.

Goodness of fit, per component, over its log residuals ``r = log(y / predicted)``:

- ``ks``: the Kolmogorov-Smirnov distance of ``r`` from a normal with its own mean and spread
  (the model says ``r`` is normal). A bimodal latency (a mixture, a slow path) shows here.
  Bad above ``max(0.05, 1.25 / sqrt(n))``: 1.25/sqrt(n) is beyond Lilliefors' 1 % critical
  value (about 1.03/sqrt(n)), so a true model is flagged about once in a thousand fits; the
  0.05 floor keeps a huge sample from flagging a shape difference too small to matter.
- ``bias``: the largest |median residual| over up to five quantile bins of the predictor
  (prompt tokens; in flight): a line that is the wrong shape (saturation, a knee) shows here.
  Bad above ``max(0.10, 4 x 1.25 sigma / sqrt(smallest bin))``: a 10 % systematic error, or
  four standard errors of a bin's median if that is more (the largest of five bins is taken).
- ``r2``: the share of the log variance the line explains. Reported, never judged: it depends
  on how much the probe varied prompts and concurrency as much as on the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.fit import FitError
from harness.fit.observations import Floats, Observations

PARAMS = ("ttft_s", "ttft_per_prompt_token_s", "tpot_s", "tpot_per_in_flight_s", "sigma")
SLOPES = {"ttft_per_prompt_token_s": "prompt", "tpot_per_in_flight_s": "in_flight"}
MIN_REQUESTS = 20
KS_FLOOR, KS_COEF = 0.05, 1.25
BIAS_FLOOR = 0.10
METHOD = (
    "least squares of log latency (the median model: f has median 1), both components "
    "jointly weighted by their residual covariance (SUR), Gauss-Newton, parameters >= 0; "
    "sigma: RMS of both components' log residuals"
)


@dataclass(frozen=True, slots=True)
class Line:
    """``y = a + b x`` (the median), fitted in log space."""

    a: float
    b: float

    def at(self, x: Floats) -> Floats:
        return self.a + self.b * x


def _ols_start(x: Floats, y: Floats) -> tuple[float, float]:
    if np.ptp(x) == 0:
        return float(np.median(y)), 0.0
    b, a = np.polyfit(x, y, 1)
    return max(float(a), float(np.min(y)) * 0.5), max(float(b), 0.0)


def _sse(x: Floats, ly: Floats, a: float, b: float) -> float:
    p = a + b * x
    if np.any(p <= 0):
        return math.inf
    return float(np.sum((ly - np.log(p)) ** 2))


def fit_line(x: Floats, y: Floats, fixed_b: float | None = None) -> Line:
    """Least squares of ``log y - log(a + b x)``, a and b >= 0; ``fixed_b`` holds the slope."""
    ly = np.log(y)
    if fixed_b is not None:  # one parameter: Gauss-Newton on a alone
        a, b = max(float(np.median(y - fixed_b * x)), 1e-12), fixed_b
    else:
        a, b = _ols_start(x, y)
        a = max(a, 1e-12)
    sse = _sse(x, ly, a, b)
    for _ in range(60):
        p = a + b * x
        r = ly - np.log(p)
        j = np.stack([1.0 / p, x / p], axis=1) if fixed_b is None else (1.0 / p)[:, None]
        step = np.linalg.lstsq(j, r, rcond=None)[0]
        da, db = float(step[0]), float(step[1]) if fixed_b is None else 0.0
        t = 1.0
        while t > 1e-6:  # step halving, staying where both are >= 0 and the SSE falls
            na, nb = max(a + t * da, 0.0), max(b + t * db, 0.0)
            new = _sse(x, ly, na, nb)
            if new <= sse:
                break
            t /= 2
        else:
            break
        done = abs(sse - new) <= 1e-12 * max(sse, 1e-300)
        a, b, sse = na, nb, new
        if done:
            break
    return Line(a, b)


@dataclass(frozen=True, slots=True)
class Goodness:
    n: int
    sigma: float  # this component's own RMS log residual
    r2: float
    ks: float
    ks_limit: float
    bias: float
    bias_limit: float

    @property
    def ok(self) -> bool:
        return self.ks <= self.ks_limit and self.bias <= self.bias_limit


def ks_normal(r: Floats) -> float:
    """KS distance of ``r`` from the normal with its mean and standard deviation."""
    n = len(r)
    s = float(np.std(r, ddof=1)) if n > 1 else 0.0
    if s == 0.0:
        return 0.0
    z = np.sort((r - np.mean(r)) / (s * math.sqrt(2.0)))
    cdf = 0.5 * (1.0 + np.array([math.erf(v) for v in z]))
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - cdf), np.max(cdf - (i - 1) / n)))


def _bias(x: Floats, r: Floats) -> tuple[float, int]:
    """The largest |median residual| over up to five quantile bins of x, and the smallest
    bin's size. Bins break at distinct values, so a few probe levels each get their own."""
    levels = np.unique(x)
    if len(levels) <= 5:
        bins = [r[x == v] for v in levels]
    else:
        edges = np.unique(np.quantile(x, [0.2, 0.4, 0.6, 0.8]))
        idx = np.searchsorted(edges, x, side="right")
        bins = [r[idx == k] for k in range(len(edges) + 1)]
    bins = [b for b in bins if len(b) >= 5] or [r]
    return max(abs(float(np.median(b))) for b in bins), min(len(b) for b in bins)


def goodness(x: Floats, y: Floats, line: Line) -> Goodness:
    r = np.log(y) - np.log(line.at(x))
    n = len(r)
    sigma = math.sqrt(float(np.sum(r**2)) / max(n - 2, 1))
    ly = np.log(y)
    tot = float(np.sum((ly - np.mean(ly)) ** 2))
    r2 = 1.0 - float(np.sum(r**2)) / tot if tot > 0 else 0.0
    bias, smallest = _bias(x, r)
    return Goodness(
        n=n,
        sigma=sigma,
        r2=r2,
        ks=ks_normal(r),
        ks_limit=max(KS_FLOOR, KS_COEF / math.sqrt(n)),
        bias=bias,
        bias_limit=max(BIAS_FLOOR, 4 * 1.25 * sigma / math.sqrt(smallest)),
    )


@dataclass(frozen=True, slots=True)
class Fit:
    values: dict[str, float]  # PARAMS
    ci: dict[str, tuple[float, float]]
    fixed: dict[str, float]
    ttft: Goodness
    tpot: Goodness
    residual_correlation: float  # of the two components' residuals: 1 if f were all the noise
    resamples: int
    seed: int

    @property
    def bad(self) -> list[str]:
        return [name for name, g in (("ttft", self.ttft), ("tpot", self.tpot)) if not g.ok]


def check_identifiable(obs: Observations, fixed: dict[str, float]) -> None:
    """FitError when the records cannot pin a parameter down (exit 2, saying what to do)."""
    if obs.n < MIN_REQUESTS:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(obs.skipped.items())) or "none skipped"
        raise FitError(
            f"only {obs.n} completed streamed requests with token counts (need "
            f"{MIN_REQUESTS}; records left out: {why}); the model is fitted on "
            "streams, whose TTFT and inter-token gaps are measured"
        )
    hints = {
        "prompt": "vary the prompt lengths (calibrate: --prompt-tokens 128,512,2048)",
        "in_flight": "vary the concurrency (calibrate: --concurrency 1,4,16)",
    }
    for name, what in SLOPES.items():
        if name in fixed:
            continue
        x = obs.prompt if what == "prompt" else obs.in_flight
        lo, hi = np.quantile(x, [0.1, 0.9])
        if lo == hi:
            raise FitError(
                f"{name} cannot be identified: {what.replace('_', ' ')} was "
                f"{lo:g} in at least 90 % of the {obs.n} requests; {hints[what]}, "
                f"or hold it: --fix {name}=0"
            )


def _residuals(obs: Observations, t: Line, g: Line) -> tuple[Floats, Floats]:
    return (
        np.log(obs.ttft) - np.log(t.at(obs.prompt)),
        np.log(obs.tpot) - np.log(g.at(obs.in_flight - 1.0)),
    )


def _joint(obs: Observations, t: Line, g: Line, free: list[int]) -> tuple[Line, Line]:
    """Both lines at once, weighting each request's residual pair by the inverse of their
    2x2 covariance (seemingly unrelated regressions). The model's one jitter per attempt makes
    the two residuals move together; their difference carries no jitter, so the shapes are
    pinned down far better than by two separate fits. With uncorrelated residuals this is the
    two separate fits again."""
    rt, rg = _residuals(obs, t, g)
    cov = np.cov(np.stack([rt, rg])) + np.eye(2) * 1e-12
    scale = math.sqrt(cov[0, 0] * cov[1, 1])
    rho = cov[0, 1] / scale  # capped below 1: a perfect correlation would make it singular
    cov[0, 1] = cov[1, 0] = math.copysign(min(abs(rho), 0.999), rho) * scale
    wl = np.linalg.cholesky(np.linalg.inv(cov)).T  # w = L^T r has identity covariance
    xp, xg = obs.prompt, obs.in_flight - 1.0

    def cost(th: Floats) -> float:
        pt, pg = th[0] + th[1] * xp, th[2] + th[3] * xg
        if np.any(pt <= 0) or np.any(pg <= 0):
            return math.inf
        r = np.stack([np.log(obs.ttft) - np.log(pt), np.log(obs.tpot) - np.log(pg)])
        return float(np.sum((wl @ r) ** 2))

    th = np.array([t.a, t.b, g.a, g.b])
    best = cost(th)
    for _ in range(60):
        pt, pg = th[0] + th[1] * xp, th[2] + th[3] * xg
        r = np.stack([np.log(obs.ttft) - np.log(pt), np.log(obs.tpot) - np.log(pg)])
        zero = np.zeros_like(xp)
        jt = np.stack([1 / pt, xp / pt, zero, zero], axis=1)  # d log(pred) / d theta
        jg = np.stack([zero, zero, 1 / pg, xg / pg], axis=1)
        wj = np.concatenate([wl[0, 0] * jt + wl[0, 1] * jg, wl[1, 0] * jt + wl[1, 1] * jg])
        wr = np.concatenate([wl[0, 0] * r[0] + wl[0, 1] * r[1], wl[1, 0] * r[0] + wl[1, 1] * r[1]])
        step = np.zeros(4)
        step[free] = np.linalg.lstsq(wj[:, free], wr, rcond=None)[0]
        s = 1.0
        while s > 1e-6:  # step halving, parameters kept >= 0
            cand = np.maximum(th + s * step, 0.0)
            new = cost(cand)
            if new <= best:
                break
            s /= 2
        else:
            break
        done = abs(best - new) <= 1e-12 * max(best, 1e-300)
        th, best = cand, new
        if done:
            break
    return Line(float(th[0]), float(th[1])), Line(float(th[2]), float(th[3]))


def _point(obs: Observations, fixed: dict[str, float]) -> tuple[Line, Line, float]:
    t = fit_line(obs.prompt, obs.ttft, fixed.get("ttft_per_prompt_token_s"))
    g = fit_line(obs.in_flight - 1.0, obs.tpot, fixed.get("tpot_per_in_flight_s"))
    free = [i for i, p in enumerate(PARAMS[:4]) if p not in fixed]
    t, g = _joint(obs, t, g, free)
    rt, rg = _residuals(obs, t, g)
    sigma = math.sqrt(float(np.sum(rt**2) + np.sum(rg**2)) / max(2 * obs.n - len(free), 1))
    return t, g, sigma


def _take(obs: Observations, idx: npt.NDArray[np.int64]) -> Observations:
    return Observations(
        prompt=obs.prompt[idx],
        output=obs.output[idx],
        ttft=obs.ttft[idx],
        tpot=obs.tpot[idx],
        in_flight=obs.in_flight[idx],
        cls=(),
        estimated=0,
        skipped={},
    )


def fit(
    obs: Observations, *, fixed: dict[str, float] | None = None, resamples: int = 200, seed: int = 1
) -> Fit:
    """The fit, its bootstrap intervals and goodness; FitError if not identifiable."""
    fixed = dict(fixed or {})
    check_identifiable(obs, fixed)
    t, g, sigma = _point(obs, fixed)
    values = dict(zip(PARAMS, (t.a, t.b, g.a, g.b, sigma), strict=True))
    rng = np.random.default_rng(seed)
    draws = np.empty((resamples, len(PARAMS)))
    for k in range(resamples):
        bt, bg, bs = _point(_take(obs, rng.integers(0, obs.n, obs.n)), fixed)
        draws[k] = (bt.a, bt.b, bg.a, bg.b, bs)
    ci = {
        p: (float(np.quantile(draws[:, i], 0.025)), float(np.quantile(draws[:, i], 0.975)))
        for i, p in enumerate(PARAMS)
    }
    rt, rg = _residuals(obs, t, g)
    corr = float(np.corrcoef(rt, rg)[0, 1]) if np.std(rt) > 0 and np.std(rg) > 0 else 0.0
    return Fit(
        values=values,
        ci=ci,
        fixed=fixed,
        ttft=goodness(obs.prompt, obs.ttft, t),
        tpot=goodness(obs.in_flight - 1.0, obs.tpot, g),
        residual_correlation=corr,
        resamples=resamples,
        seed=seed,
    )
