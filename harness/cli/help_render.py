"""How ``--help`` is drawn, two corrections to typer's rich help applied once on import:

- a flag (``--verify-live``, ``--report/--no-report``, ``--help``) shows no value type: typer
  labels it ``<bool>``, as if it took a value, which it never does;
- an option's help never ends in an ellipsis: a word longer than its column (an example such as
  ``classes.+batch.weight=0.2``, a default such as ``results/<profile>-calibrate-...``) is
  folded onto the next line instead of cut, so an 80-column terminal shows every example whole.

Both only change what the help prints; parsing is typer's and click's, untouched.
"""

from __future__ import annotations

from typing import Any

_applied = False


def apply() -> None:
    """Install both corrections (idempotent)."""
    global _applied
    if _applied:
        return
    from rich.text import Text
    from typer import core, rich_utils

    show_type = core.TyperOption.display_type_rich

    def display_type_rich(self: core.TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None  # a flag takes no value
        return show_type(self, ctx)

    core.TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]

    param_help = rich_utils._get_parameter_help

    def folded_help(*args: Any, **kw: Any) -> Any:
        cell = param_help(*args, **kw)  # a Columns of Text (help, default, ...)
        for part in getattr(cell, "renderables", ()):
            if isinstance(part, Text):
                part.overflow = "fold"
        return cell

    rich_utils._get_parameter_help = folded_help
    _applied = True
