"""The ``export`` group: ``harness export KIND SCENARIO`` for every kind the command accepts (read
from its ``kind`` argument's choices, so a new kind gets snapshots or fails the test) over two
scenarios of the library, plus ``hpa --adapter-rules FILE``; the kinds that need token budgets
(envoy, litellm) over the bundled ``token-budgets`` profile instead, and those that need a
``flow_control`` section (epp) over ``tests/export/profiles/flow-control.yaml``.

Per run, three files: ``KIND.yaml`` (stdout), ``KIND.stderr`` (the exit code, then stderr: the
"not expressible" notes) and, for ``hpa--adapter-rules``, ``.rules.yaml`` (the file written).
Masked: the harness version in the manifest's header comment (``harness <VERSION>``). The rules
file is named by a relative path in a temporary working directory, so the comment that names it
(and wraps around it) is the same in every clone; ANSI escapes are stripped from stderr should a
CI environment force colour on.
"""

from __future__ import annotations

import contextlib
import enum
import re
import tempfile
import typing
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tests.snapshots.cli_help import ENV

SCENARIOS = ("scenarios/metric-outage", "scenarios/sustained-increase")
TOKEN_PROFILE = "token-budgets"  # envoy and litellm need tokens.budgets
FLOW_PROFILE = "tests/export/profiles/flow-control.yaml"  # epp needs flow_control
RULES = "adapter-rules.yaml"
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


def kinds() -> list[str]:
    """The choices of ``harness export``'s ``kind`` argument, as the CLI offers them."""
    import typer

    from harness.cli import app

    root: Any = typer.main.get_command(app)
    cmd = root.get_command(root.context_class(root, info_name="harness"), "export")
    for param in cmd.params:
        if param.name == "kind":
            return _choices(param)
    raise AssertionError("harness export has no `kind` argument any more")


def _choices(param: Any) -> list[str]:
    """A choice parameter's values: click's Choice, or (typer >= 0.2x builds types lazily) the
    Enum or Literal it was annotated with."""
    choices = getattr(getattr(param, "type", None), "choices", None)
    if choices is not None:
        return [str(getattr(c, "value", c)) for c in choices]
    ann = param.type_descriptor.annotation
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [str(m.value) for m in ann]
    if typing.get_origin(ann) is typing.Literal:
        return [str(a) for a in typing.get_args(ann)]
    raise AssertionError(f"cannot read the choices of harness export's kind ({ann!r})")


def _mask(data: bytes) -> bytes:
    from harness import __version__

    return data.replace(f"harness {__version__}".encode(), b"harness <VERSION>")


def _invoke(args: list[str]) -> tuple[bytes, bytes]:
    from harness.cli import app

    r = CliRunner().invoke(app, args, env=ENV, color=False)
    if r.exit_code != 0:
        raise AssertionError(
            f"harness {' '.join(args)} exited {r.exit_code}:\n{r.output}\n{r.exception!r}"
        )
    stderr = b"exit %d\n" % r.exit_code + _ANSI.sub(b"", r.stderr_bytes)
    return _mask(r.stdout_bytes), _mask(stderr)


def _needs_budgets(kind: str) -> bool:
    from harness.export.targets import TARGETS

    return TARGETS[kind].needs_budgets


def _needs_flow_control(kind: str) -> bool:
    from harness.export.targets import TARGETS

    return TARGETS[kind].needs_flow_control


def produce() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for kind in kinds():  # the gateways' kinds over the bundled profile with token budgets
        if _needs_budgets(kind):
            out, err = _invoke(["export", kind, TOKEN_PROFILE])
            files[f"{TOKEN_PROFILE}/{kind}.yaml"], files[f"{TOKEN_PROFILE}/{kind}.stderr"] = (
                out,
                err,
            )
    for kind in kinds():  # epp over the test profile with a flow_control section
        if _needs_flow_control(kind):
            root = Path(__file__).resolve().parents[2]
            out, err = _invoke(["export", kind, str(root / FLOW_PROFILE)])
            stem = f"{Path(FLOW_PROFILE).stem}/{kind}"
            files[f"{stem}.yaml"], files[f"{stem}.stderr"] = out, err
    for spec in SCENARIOS:
        name = spec.rsplit("/", 1)[-1]
        for kind in kinds():
            if _needs_budgets(kind) or _needs_flow_control(kind):  # the scenarios have neither
                continue
            out, err = _invoke(["export", kind, spec])
            files[f"{name}/{kind}.yaml"], files[f"{name}/{kind}.stderr"] = out, err
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
            out, err = _invoke(["export", "hpa", spec, "--adapter-rules", RULES])
            rules = _mask((Path(tmp) / RULES).read_bytes())
        stem = f"{name}/hpa--adapter-rules"
        files[f"{stem}.yaml"], files[f"{stem}.stderr"] = out, err
        files[f"{stem}.rules.yaml"] = rules
    return files
