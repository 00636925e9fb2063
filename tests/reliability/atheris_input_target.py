"""An atheris (libFuzzer) target for the bad-input surfaces; run by test_input_atheris.py.

The first byte picks the surface: the profile loader, a --set value, a --threshold
expression, or the stub's chat request parser. Each may refuse its input with its own error
type (ProfileError, ThresholdError, BadRequest); any other exception is a crash, which
libFuzzer reports with the input that caused it, exiting non-zero.

    python tests/reliability/atheris_input_target.py -runs=20000 -seed=1
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from harness.profile import ProfileError, loads, yaml_guard
    from harness.profile.thresholds import ThresholdError, parse_threshold
    from harness.stub.chat import BadRequest, ChatRequest

BASE = (
    "name: t\nduration_s: 60\narrivals: {phases: [{until_s: 60, rate_per_s: 1}]}\n"
    "classes: {a: {weight: 1}}\n"
)


def one_input(data: bytes) -> None:
    if not data:
        return
    which, rest = data[0] % 4, data[1:]
    text = rest.decode("utf-8", "replace")
    try:
        if which == 0:
            loads(rest, file="atheris.yaml")
        elif which == 1:
            loads(BASE, file="atheris.yaml", overrides=[text])
        elif which == 2:
            parse_threshold(text)
        else:
            ChatRequest(rest, None, "m")
    except (ProfileError, ThresholdError, BadRequest):
        pass  # a refusal with a message: what bad input should get


def main() -> None:
    assert yaml_guard.MAX_NODES > 0  # imported (and instrumented) above
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
