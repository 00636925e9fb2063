"""What a live run says before its load starts, about what it will not do as the simulation
does (harness/live/run/orchestrate.py ``_notes``)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from harness.live.run.orchestrate import _notes
from harness.live.run.settings import LiveSettings
from harness.profile import load


def _said(tmp_path: Path, no_proxy: bool) -> str:
    spec = "scenarios/ack-lost-during-drain"
    prof = load(spec)
    assert any(f.kind == "ack_loss" for f in prof.faults)
    settings = LiveSettings.from_options(
        profile_spec=spec,
        overrides=(),
        profile=prof,
        out=tmp_path / "r",
        time_scale=0.1,
        no_proxy=no_proxy,
    )
    buf = io.StringIO()
    _notes(settings, Console(file=buf, width=200))
    return buf.getvalue()


def test_ack_loss_is_applied_by_the_proxy_and_skipped_without_it(tmp_path: Path) -> None:
    assert "ack_loss" not in _said(tmp_path, no_proxy=False)  # the proxy applies it
    assert "ack_loss faults are the queue's" in _said(tmp_path, no_proxy=True)


def _said_tokens(tmp_path: Path, no_proxy: bool, target: str = "stub") -> str:
    spec = tmp_path / "budget.yaml"
    spec.write_text(
        "name: b\nduration_s: 10\narrivals: {phases: [{until_s: 10, rate_per_s: 1}]}\n"
        "classes: {chat: {weight: 1}}\n"
        "tokens: {budgets: {tpm: {limit: 1000}}}\n",
        encoding="utf-8",
    )
    prof = load(str(spec))
    kw: dict[str, object] = {"target": target, "model": "m"} if target != "stub" else {}
    settings = LiveSettings.from_options(
        profile_spec=str(spec),
        overrides=(),
        profile=prof,
        out=tmp_path / "r",
        no_proxy=no_proxy,
        **kw,  # type: ignore[arg-type]
    )
    buf = io.StringIO()
    _notes(settings, Console(file=buf, width=400))
    return buf.getvalue()


def test_token_budgets_are_named_when_the_run_cannot_apply_or_count_them(tmp_path: Path) -> None:
    assert "tokens.budgets" not in _said_tokens(tmp_path, no_proxy=False)  # stub: usage is there
    skipped = _said_tokens(tmp_path, no_proxy=True)
    assert "budget.yaml: tokens.budgets (tpm): token budgets are the proxy's" in skipped
    real = _said_tokens(tmp_path, no_proxy=False, target="http://127.0.0.1:9/v1")
    assert "tokens.budgets (tpm) charge each answer's usage" in real
