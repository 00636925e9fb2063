"""YAML that cannot explode: size, depth and alias expansion bounded while composing.

Design note. A "billion laughs" document is small as text and as a composed node graph (an
alias is a reference to an already composed node), and only explodes when something walks the
graph as a tree -- the profile loader does, to keep a line number for every path. So the
bound is enforced during composition, before any walk: every composed node counts 1, every
alias counts the expanded size of the node it names (known, since an anchor is composed
before it can be named), and the running total is the size of the fully expanded tree. Depth
is bounded the same way, aliases included (an alias at depth d naming a subtree of height h
reaches d + h), so neither the composer's recursion nor the walker's can overflow the stack.
An alias that names a node still being composed (a recursive structure) is refused outright.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

MAX_BYTES: Final = 1 << 20  # a profile is a config file; arrival traces go in arrivals.file
MAX_SET_BYTES: Final = 64 << 10  # one --set value
MAX_DEPTH: Final = 64  # the schema nests 6 deep
MAX_NODES: Final = 100_000  # after alias expansion; the bundled profiles have under 150


class YamlLimitError(yaml.MarkedYAMLError):
    """A document over one of the limits above; ``problem`` names the limit."""


class GuardedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose composer refuses bombs and deep nesting before expansion."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        # One entry per collection being composed: the tallest child height so far. Its
        # length is the current depth.
        self._tallest: list[int] = []
        # Expanded size and height of each composed node that carries an anchor.
        self._anchored: dict[int, tuple[int, int]] = {}

    def _refuse(self, problem: str, mark: Any) -> YamlLimitError:
        return YamlLimitError(None, None, problem, mark)

    def _count(self, n: int, mark: Any) -> None:
        self._expanded += n
        if self._expanded > MAX_NODES:
            raise self._refuse(
                f"more than {MAX_NODES:,} values once aliases are expanded (a YAML bomb?)", mark
            )

    def _reached(self, height: int, mark: Any) -> None:
        """A child of this height was composed at the current depth."""
        stack = self._tallest
        if len(stack) + height > MAX_DEPTH:
            raise self._refuse(f"nested deeper than {MAX_DEPTH} levels", mark)
        if stack and height > stack[-1]:
            stack[-1] = height

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark = event.start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            known = self._anchored.get(id(node))
            if known is None:
                raise self._refuse("an alias names a node that contains it (recursive)", mark)
            size, height = known
            self._reached(height, mark)
            self._count(size, mark)
            return node
        anchor = getattr(event, "anchor", None)
        self._reached(1, mark)  # refuses before descending: the composer recurses too
        start = self._expanded
        self._count(1, mark)
        self._tallest.append(0)
        node = super().compose_node(parent, index)
        height = 1 + self._tallest.pop()
        self._reached(height, mark)
        if anchor is not None:
            self._anchored[id(node)] = (self._expanded - start, height)
        return node


def compose(text: str) -> yaml.Node | None:
    """The node tree of one document, or None if empty; YAMLError (or YamlLimitError)."""
    loader = GuardedLoader(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()


def load_value(text: str) -> Any:
    """One small YAML value (a --set right-hand side), under the same limits."""
    if len(text) > MAX_SET_BYTES:
        raise YamlLimitError(None, None, f"longer than {MAX_SET_BYTES:,} characters", None)
    loader = GuardedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
