"""A live run's settings: frozen, validated once at the edge."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.live.run.settings import LiveSettings, SettingsError
from harness.live.transport.target import BadTarget
from harness.profile import load


def _settings(tmp_path: Path, **kw: object) -> LiveSettings:
    return LiveSettings.from_options(
        profile_spec="smoke", profile=load("smoke"), out=tmp_path / "out", **kw
    )  # type: ignore[arg-type]


def test_settings_are_frozen_and_resolved_once(tmp_path: Path) -> None:
    s = _settings(tmp_path, api_key_env="MY_KEY", target="http://127.0.0.1:9/v1", model="m")
    assert s.profile.wire.auth.env == "MY_KEY" and s.key_env == "MY_KEY"
    assert s.seed == load("smoke").seed and s.out.is_absolute() and s.proxied
    assert s.direct == ("http://127.0.0.1:9", "/v1/chat/completions")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seed = 2  # type: ignore[misc]
    stub = _settings(tmp_path, seed=7, no_proxy=True)
    assert stub.stub and stub.key_env is None and stub.model_name == "harness-stub"
    assert stub.seed == 7 and not stub.proxied and stub.where == "the bundled stub"


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"time_scale": 0}, SettingsError),
        ({"workers": -1}, SettingsError),
        ({"target": "ftp://x"}, BadTarget),
        ({"target": "http://127.0.0.1:9"}, SettingsError),  # no --model
        ({"target": "http://127.0.0.1:9", "model": "m", "time_scale": 0.5}, SettingsError),
        ({"remote_workers": 1, "no_proxy": True}, SettingsError),
    ],
)
def test_bad_settings_are_value_errors(tmp_path: Path, kw: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        _settings(tmp_path, **kw)
