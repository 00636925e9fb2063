"""The simulation's driver is cut into named steps, none longer than the house's 120 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import harness.sim.runner as runner

SOURCE = Path(runner.__file__).parent / "runner.py"  # compiled, __file__ is the .so
LONGEST = 120


def _lengths() -> dict[str, int]:
    tree = ast.parse(SOURCE.read_text())
    return {
        n.name: (n.end_lineno or n.lineno) - n.lineno + 1
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_no_function_of_the_sim_runner_is_longer_than_120_lines() -> None:
    lengths = _lengths()
    assert "_simulate" in lengths  # the file read is the runner's source
    too_long = {name: n for name, n in lengths.items() if n > LONGEST}
    assert too_long == {}


def test_the_loop_and_its_steps_are_named_methods_of_one_run() -> None:
    steps = {"loop", "arrive", "event", "carry_out", "dispatch", "result"}
    assert steps <= set(vars(runner._Run))
