"""A user's profile with only the tuned keys changed (``tuned.yaml`` of ``harness tune``).

The YAML is never re-dumped: it is composed (PyYAML nodes keep their text positions), and each
change is a text edit at a known span -- a scalar's text replaced in place, or new lines (block
style) or ``, key: value`` (flow style) inserted under the deepest mapping that exists. So
comments, key order, quoting and flow/block style survive byte for byte. After editing, the new
text is loaded and compared with the old: each changed path must hold exactly its new value
and every other value must be unchanged, else ValueError (never a silently wrong profile).

An anchor (``&name``) on the way to a changed key, or an alias (``*name``) on it, would carry
the edit to every other place the anchor is used (the text is shared, a ``--set`` is not):
those aliases are first written out in full, as a flow collection of the anchored value, so
the edit changes that one place only.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import yaml

from harness.profile import LoadedProfile, yaml_guard

Value = int | float | str | bool | None


class TunedProfileError(ValueError):
    """A change tuned.yaml cannot hold: ``path`` names the dotted key."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


# A string that can be written without quotes in block and flow context alike.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


def round_sig(x: float, digits: int = 3) -> float:
    """x rounded to `digits` significant digits, as a person would write it (17.345 -> 17.3,
    0.012345 -> 0.0123, 1234.5 -> 1230.0; 0.0 -> 0.0). Decimal arithmetic on the shortest
    repr, so no 0.30000000000000004; halves round away from zero (0.125 -> 0.13)."""
    if digits < 1:
        raise ValueError(f"round_sig: digits must be >= 1, not {digits}")
    if x == 0 or not math.isfinite(x):
        return float(x)
    d = Decimal(repr(float(x)))
    quantum = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(quantum, rounding=ROUND_HALF_UP))


def format_number(v: int | float) -> str:
    """YAML text for a value: ints as ints; floats without exponent and without trailing
    zeros, written as integers when they are whole (1230.0 -> '1230', 17.3 -> '17.3',
    2.0 -> '2', 1e-05 -> '0.00001'). NaN and infinities are refused (ValueError)."""
    if isinstance(v, bool):
        raise ValueError(f"format_number: {v!r} is a bool, not a number")
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        raise ValueError(f"format_number: {v!r} cannot be written as a profile value")
    text = format(Decimal(repr(v)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _format_value(v: Any) -> str:
    """YAML text for a scalar that reads back as exactly ``v`` in block and flow context."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return ".nan" if v != v else (".inf" if v > 0 else "-.inf")
    if isinstance(v, int | float):
        return format_number(v)
    if isinstance(v, str):
        if _PLAIN.fullmatch(v) and yaml.safe_load(v) == v:
            return v
        if v.isprintable():
            return "'" + v.replace("'", "''") + "'"
        return json.dumps(v, ensure_ascii=False)  # a double-quoted YAML scalar, escapes kept
    raise ValueError(f"cannot write {v!r} ({type(v).__name__}) as a profile value")


def _flow(v: Any) -> str:
    """A whole value as one line of flow YAML (an alias written out in full)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_format_value(k)}: {_flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_flow(x) for x in v) + "]"
    return _format_value(v)


@dataclasses.dataclass(slots=True)
class _Event:
    """A node as the parser met it: its kind, anchor and text span, and its children (by key,
    or by index for a sequence)."""

    kind: str  # "map", "seq", "scalar" or "alias"
    anchor: str | None
    start: int
    end: int
    children: list[tuple[str, _Event]] = dataclasses.field(default_factory=list)


def _event_tree(source: str) -> _Event | None:
    events = iter(yaml.parse(source, Loader=yaml.SafeLoader))

    def at(mark: Any) -> int:
        return int(mark.index)  # the parser marks every event it emits

    def node(ev: yaml.Event) -> _Event:
        start, end = at(ev.start_mark), at(ev.end_mark)
        if isinstance(ev, yaml.AliasEvent):
            return _Event("alias", ev.anchor, start, end)
        if isinstance(ev, yaml.ScalarEvent):
            return _Event("scalar", ev.anchor, start, end)
        is_map = isinstance(ev, yaml.MappingStartEvent)
        out = _Event("map" if is_map else "seq", getattr(ev, "anchor", None), start, end)
        while True:
            nxt = next(events)
            if isinstance(nxt, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                out.end = at(nxt.end_mark)
                return out
            if is_map:
                key = node(nxt)  # a key that is no scalar is never on a dotted path
                name = str(nxt.value) if isinstance(nxt, yaml.ScalarEvent) else ""
                out.children.append((name if key.kind == "scalar" else "", node(next(events))))
            else:
                out.children.append((str(len(out.children)), node(nxt)))

    for ev in events:
        if isinstance(ev, yaml.ScalarEvent | yaml.AliasEvent | yaml.CollectionStartEvent):
            return node(ev)
    return None


def _uses(root: _Event) -> dict[int, list[_Event]]:
    """Each anchored node's start -> the aliases that refer to it (an alias names the latest
    anchor of its name before it)."""
    latest: dict[str, int] = {}
    out: dict[int, list[_Event]] = {}

    def walk(n: _Event) -> None:
        if n.kind == "alias":
            if n.anchor in latest:
                out.setdefault(latest[n.anchor], []).append(n)
            return
        if n.anchor is not None:
            latest[n.anchor] = n.start
        for _, child in n.children:
            walk(child)

    walk(root)
    return out


def _unshared(source: str, path: str) -> str:
    """``source`` with every alias that shares text with ``path``'s way written out in full:
    an alias on the way itself, and the aliases of an anchored node on it."""
    parts = path.split(".")
    for _ in range(source.count("*") + 1):  # each round writes at least one alias out
        root = _event_tree(source)
        if root is None:
            return source
        uses = _uses(root)
        node, depth, spans = root, 0, list[tuple[int, int]]()
        while True:
            if node.kind == "alias":
                spans = [(node.start, node.end)]
            elif node.anchor is not None and uses.get(node.start):
                spans = [(a.start, a.end) for a in uses[node.start]]
            if spans or depth == len(parts):
                break
            nxt = next((c for k, c in node.children if k == parts[depth]), None)
            if nxt is None:
                break
            node, depth = nxt, depth + 1
        if not spans:
            return source
        value = _get(_load(source, "the profile"), parts[:depth])
        text = _flow(value)
        for start, end in sorted(spans, reverse=True):
            source = source[:start] + text + source[end:]
    raise TunedProfileError(path, f"tuned profile: cannot set {path}: its aliases do not unwind")


def _get(tree: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if isinstance(tree, list):
            tree = tree[int(part)]
        else:
            tree = next(v for k, v in tree.items() if str(k) == part)
    return tree


def _plain_copy(tree: Any) -> Any:
    """A copy that shares nothing (deepcopy keeps an anchor's sharing; ``--set`` does not)."""
    if isinstance(tree, dict):
        return {k: _plain_copy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain_copy(v) for v in tree]
    return tree


def _flow_value(rest: Sequence[str], text: str) -> str:
    """``a: {b: {c: text}}`` for rest = [a, b, c]."""
    out = f"{rest[-1]}: {text}"
    for key in reversed(rest[:-1]):
        out = f"{key}: {{{out}}}"
    return out


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _last_index(node: yaml.Node) -> int:
    """Where the text of a node's subtree ends (the end of its last scalar or flow
    collection; block collections' own end marks point at the next token)."""
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        return int(node.end_mark.index)
    ends = [int(node.start_mark.index)]
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            ends += [_last_index(k), _last_index(v)]
    elif isinstance(node, yaml.SequenceNode):
        ends += [_last_index(item) for item in node.value]
    return max(ends)


def _key_column(node: yaml.MappingNode) -> int:
    return int(node.value[0][0].start_mark.column)


class _Editor:
    """Applies one change to ``source``; returns the edited text."""

    def __init__(self, source: str, path: str, value: Value) -> None:
        self.source = source
        self.path = path
        self.parts = path.split(".")
        try:
            self.text = _format_value(value)
        except ValueError as e:
            raise self.fail(str(e)) from None
        self.newline = "\r\n" if "\r\n" in source else "\n"

    def fail(self, why: str) -> TunedProfileError:
        return TunedProfileError(self.path, f"tuned profile: cannot set {self.path}: {why}")

    def apply(self) -> str:
        if not self.path or any(not p for p in self.parts):
            raise self.fail("empty part in the dotted path")
        try:
            root = yaml_guard.compose(self.source)
        except yaml.YAMLError as e:
            raise ValueError(f"tuned profile: the profile is not valid YAML: {e}") from None
        if root is None:
            raise self.fail("the profile is empty")
        node: yaml.Node = root
        parent_key_col = -1  # column of the key whose value is `node` (-1 for the root)
        for i, part in enumerate(self.parts):
            where = ".".join(self.parts[: i + 1])
            last = i == len(self.parts) - 1
            if isinstance(node, yaml.SequenceNode):
                if not part.isdigit() or int(part) >= len(node.value):
                    raise self.fail(f"{where}: no such list element (lists are not extended)")
                node = node.value[int(part)]
                parent_key_col = -1
            elif isinstance(node, yaml.MappingNode):
                found = self._child(node, part, where)
                if found is None:
                    return self._insert(node, parent_key_col, self.parts[i:])
                key, child = found
                node, parent_key_col = child, int(key.start_mark.column)
            elif _is_null(node):
                # `parent: null` (or `parent:` with nothing): the value becomes a mapping
                return self._replace(node, "{" + _flow_value(self.parts[i:], self.text) + "}")
            else:
                raise self.fail(f"{'.'.join(self.parts[:i]) or 'the document'} is a scalar")
            if last:
                if isinstance(node, yaml.CollectionNode):
                    return self._replace_collection(node)
                return self._replace(node, self.text)
        raise AssertionError("unreachable")

    def _child(
        self, node: yaml.MappingNode, part: str, where: str
    ) -> tuple[yaml.Node, yaml.Node] | None:
        for key, child in node.value:
            if isinstance(key, yaml.ScalarNode) and str(key.value) == part:
                if child.start_mark.index < key.end_mark.index:
                    # an alias: composed as the anchored node, which lives earlier in the text
                    raise self.fail(f"{where} is an alias (*name); edit its anchor instead")
                return key, child
        return None

    def _replace(self, node: yaml.Node, text: str) -> str:
        start, end = int(node.start_mark.index), int(node.end_mark.index)
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            raise self.fail("its value is a block scalar (| or >)")
        if node.start_mark.line != node.end_mark.line:
            raise self.fail("its value spans several lines")
        if start == end:  # `key:` with no value: the empty scalar sits right after the colon
            text = " " + text
        return self.source[:start] + text + self.source[end:]

    def _replace_collection(self, node: yaml.CollectionNode) -> str:
        """A mapping or list set to a single value (``--set engine.scaling.dependency=null``):
        its whole text becomes the value (a block one's lines: the value, indented as they
        were)."""
        start = int(node.start_mark.index)
        end = int(node.end_mark.index) if node.flow_style else _last_index(node)
        return self.source[:start] + self.text + self.source[end:]

    def _insert(self, parent: yaml.MappingNode, parent_key_col: int, rest: Sequence[str]) -> str:
        src = self.source
        if parent.flow_style:
            close = int(parent.end_mark.index) - 1
            if close < 0 or src[close] != "}":
                raise self.fail("cannot find the closing brace of its flow mapping")
            entry = _flow_value(rest, self.text)
            if parent.value:
                at = _last_index(parent.value[-1][1])
                return src[:at] + ", " + entry + src[at:]
            return src[:close] + entry + src[close:]
        if not parent.value:  # a block mapping always has a key; be safe anyway
            raise self.fail("its parent mapping is empty")
        col = _key_column(parent)
        step = col - parent_key_col if parent_key_col >= 0 and col > parent_key_col else 2
        nl = self.newline
        lines = [
            " " * (col + step * d) + f"{key}:" + (f" {self.text}" if d == len(rest) - 1 else "")
            for d, key in enumerate(rest)
        ]
        block = nl.join(lines) + nl
        at = _last_index(parent)
        if at > 0 and src[at - 1] == "\n":
            return src[:at] + block + src[at:]
        eol = src.find("\n", at)
        if eol < 0:
            return src + nl + block
        return src[: eol + 1] + block + src[eol + 1 :]


def _load(text: str, what: str) -> Any:
    try:
        return yaml_guard.GuardedLoader(text).get_single_data()
    except yaml.YAMLError as e:
        raise ValueError(f"tuned profile: {what} is not valid YAML: {e}") from None


def _expected(tree: Any, changes: Mapping[str, Value]) -> Any:
    """The old tree with each change applied the way ``--set`` applies it."""
    out = copy.deepcopy(tree)
    for path, value in changes.items():
        parts = path.split(".")
        if not isinstance(out, dict):
            out = {}
        node: Any = out
        for part in parts[:-1]:
            if isinstance(node, list):
                node = node[int(part)]
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        if isinstance(node, list):
            node[int(parts[-1])] = value
        else:
            node[parts[-1]] = value
    return out


def _same(a: Any, b: Any) -> bool:
    """Equality that tells bools from numbers, ints from strings, and NaN equal to NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                return sub
            if not _same(a[k], b[k]):
                return _first_difference(a[k], b[k], sub)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                return _first_difference(x, y, f"{path}.{i}" if path else str(i))
    return path or "the document"


def tuned_yaml(source: str, changes: Mapping[str, Value], header: Sequence[str]) -> str:
    """`source` (the profile's YAML text) with each dotted path in `changes` set to its value.

    A key present as a scalar: its value's text span is replaced (the rest of the line kept,
    so a trailing comment stays). A key absent: inserted under its deepest existing parent
    mapping -- block style: new lines at the parent's child indentation after the parent's
    last line, missing intermediate mappings as nested block lines; flow style: ``, key:
    value`` or ``, key: {sub: value}`` after the last entry -- or at the end of the document
    at top level when no ancestor exists. A null parent (``scaling: null``) becomes a flow
    mapping ``{key: value}``. A numeric part indexes an existing list element.

    `header` lines are prepended as ``# `` comment lines and a blank line (the user's own
    leading comments follow). Raises ValueError naming the path when a path goes through a
    list (with a non-index or past its end) or a scalar, lands on a mapping or list, goes
    through an alias, or when the edited text does not load back as exactly the old tree
    with these changes."""
    text = source
    for path, value in changes.items():
        text = _Editor(_unshared(text, path), path, value).apply()
    before = _plain_copy(_load(source, "the profile"))
    after = _load(text, "the edited profile")
    want = _expected(before, changes)
    if not _same(after, want):
        where = _first_difference(after, want)
        raise TunedProfileError(
            where, f"tuned profile: editing the text would change {where} unexpectedly"
        )
    nl = "\r\n" if "\r\n" in source else "\n"
    head = "".join(f"# {line}".rstrip() + nl for h in header for line in h.splitlines() or [""])
    return head + nl + text if head else text


# -------------------------------------------------------------------------------------------
# tuned.yaml as the profile a trial ran: the changes, and the check that it loads as that.


class TunedMismatch(Exception):
    """tuned.yaml does not load as the profile its trial ran (a bug, never a silent file)."""


def read_tuned(*, path: Path | None = None, text: str | None = None) -> Any:
    """tuned.yaml (the file at ``path``, or its ``text``) loaded as ``harness sim`` loads it:
    the one place ``harness tune`` reads a profile's text (its own output, to check it)."""
    from harness import profile as profiles

    if path is not None:
        source = profiles.read_source(str(path))
    else:
        source = profiles.parse_source(text or "", file="tuned.yaml")
    return profiles.apply_overrides(source)


def set_value(text: str) -> Any:
    """A ``--set`` right-hand side, read as :func:`harness.profile.apply_override` reads it."""
    return yaml_guard.load_value(text) if text.strip() else None


def profile_changes(
    spec: str | LoadedProfile, overrides: Sequence[str], values: Mapping[str, Value]
) -> tuple[str, dict[str, Value], dict[str, str]]:
    """The profile's text, and what tuned.yaml changes in it, in order: every ``--set``, then
    every tuned value, then a trace path made absolute (the file lives in the results folder;
    a path relative to the profile would break); with a note per change that is not tuned."""
    from harness import profile as profiles

    if isinstance(spec, LoadedProfile):  # the bytes it was loaded from, not the file
        path = profiles.resolve(spec.spec)
        text = spec.source.data.decode("utf-8")
        source = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text reads it
    else:
        path = profiles.resolve(spec)
        source = path.read_text(encoding="utf-8")
    changes: dict[str, Value] = {}
    notes: dict[str, str] = {}
    for s in overrides:
        key, _, text = s.partition("=")
        changes[key.strip()] = set_value(text)
        notes[key.strip()] = " (from --set)"
    for key, v in values.items():
        changes[key] = v
        notes.pop(key, None)
    trace = changes.get("arrivals.file", at_path(_load(source, "the profile"), "arrivals.file"))
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        changes["arrivals.file"] = str((path.parent / trace).resolve())
        origin = "from --set; " if "arrivals.file" in notes else ""
        notes["arrivals.file"] = f" ({origin}made absolute: this file lives elsewhere)"
    return source, changes, notes


def at_path(tree: Any, dotted: str) -> Any:
    """The value at a dotted path, or None."""
    node = tree
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def effective(prof: Any) -> Any:
    """A profile as ``harness validate --print`` shows it (``to_dict``), its trace path made
    absolute (a profile's own relative path and tuned.yaml's absolute one name one file)."""
    from harness.profile import to_dict

    plain = to_dict(prof)
    trace = plain["arrivals"].get("file")
    if trace:
        plain["arrivals"]["file"] = str(Path(trace).resolve())
    return plain


def check_effective(tuned: Any, trial: Any) -> None:
    """TunedMismatch unless the two profiles print the same bytes (``validate --print``)."""
    from harness.profile.explain import print_yaml

    a, b = effective(tuned), effective(trial)
    if print_yaml(a) != print_yaml(b):
        where = _first_difference(a, b)
        raise TunedMismatch(
            f"it does not load as the profile its trial ran: {where} is "
            f"{at_path(a, where)!r} there, {at_path(b, where)!r} in the trial"
        )
