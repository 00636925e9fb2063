"""The layers' import rules (docs/architecture.md), read from the source: results/ is data only,
only the commands layer imports both drivers, one exit-code map, one expression evaluator."""

from __future__ import annotations

import ast
from pathlib import Path

import harness

ROOT = Path(harness.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text()) for p in ROOT.rglob("*.py")}


def _imports(tree: ast.Module) -> set[str]:
    """Every harness module imported anywhere in the file, function-level imports included."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in out if m.startswith("harness.")}


def _under(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def test_results_imports_neither_driver_nor_the_commands() -> None:
    bad = {
        path: sorted(
            m
            for m in _imports(tree)
            if any(
                _under(m, p)
                for p in ("harness.sim", "harness.live", "harness.cli", "harness.search")
            )
        )
        for path, tree in _modules().items()
        if path.startswith(("results/", "recording/", "review/", "render/"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_only_the_commands_layer_imports_both_sim_and_live() -> None:
    mods = _modules()

    def importers(package: str) -> set[str]:
        return {
            path for path, tree in mods.items() if any(_under(m, package) for m in _imports(tree))
        }

    sim, live = importers("harness.sim"), importers("harness.live")
    # the simulation is reached only from the floors above the drivers: batch/ (running many
    # simulations), search/ (tune's study, --verify-live) and the commands in cli/
    assert {p for p in sim if not p.startswith("sim/")} <= {
        p for p in mods if p.startswith(("cli/", "search/", "batch/"))
    }
    assert any(p.startswith("cli/") for p in sim) and any(p.startswith("cli/") for p in live)
    assert not {p for p in sim if p.startswith("live/")}, "live imports sim"
    assert not {p for p in live if p.startswith("sim/")}, "sim imports live"


def test_fit_imports_neither_driver_nor_the_commands() -> None:
    bad = {
        path: sorted(
            m
            for m in _imports(tree)
            if any(_under(m, p) for p in ("harness.sim", "harness.live", "harness.cli"))
        )
        for path, tree in _modules().items()
        if path.startswith("fit/")
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_results_modules_import_each_other_without_a_circle() -> None:
    rooms = ("results/", "recording/", "review/", "render/")
    mods = {p: t for p, t in _modules().items() if p.startswith(rooms)}
    name = {f"harness.{p[:-3].replace('/', '.')}": p for p in mods}
    graph = {p: {name[m] for m in _imports(t) if m in name} - {p} for p, t in mods.items()}
    done: set[str] = set()

    def visit(p: str, path: tuple[str, ...]) -> None:
        assert p not in path, " -> ".join((*path, p))
        if p not in done:
            for q in sorted(graph[p]):
                visit(q, (*path, p))
            done.add(p)

    for p in sorted(graph):
        visit(p, ())


def test_exit_codes_are_defined_once() -> None:
    defined = sorted(
        path
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in node.targets
        for n in (t.elts if isinstance(t, ast.Tuple) else [t])
        if isinstance(n, ast.Name) and n.id.startswith("EXIT_")
    )
    assert set(defined) == {"ground/exit_codes.py"}


def test_one_evaluator_of_path_expressions() -> None:
    """``lookup``/``expr_value`` are defined once, and nothing else splits an expression on '/'."""
    defs, splits = [], []
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in ("lookup", "expr_value"):
                defs.append((path, node.name))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("split", "partition", "rsplit", "rpartition")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "/"
            ):
                splits.append(path)
    assert sorted(defs) == [("results/expr.py", "expr_value"), ("results/expr.py", "lookup")]
    assert set(splits) == {"results/expr.py"}


def test_the_stub_imports_neither_the_engine_nor_live() -> None:
    import harness.stub

    stub_root = Path(harness.stub.__file__).parent
    bad = {}
    for p in stub_root.rglob("*.py"):
        mods = {
            m
            for m in _imports(ast.parse(p.read_text()))
            if _under(m, "harness.engine") or _under(m, "harness.live") or _under(m, "harness.sim")
        }
        if mods:
            bad[p.name] = sorted(mods)
    assert bad == {}


def test_one_token_bucket_class_in_the_tree() -> None:
    import harness.stub

    stub_root = Path(harness.stub.__file__).parent
    files = [*ROOT.rglob("*.py"), *stub_root.rglob("*.py")]
    found = sorted(
        f"{p.parent.name}/{p.name}:{n.name}"
        for p in files
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.ClassDef)
        and "bucket" in n.name.lower()
        and not n.name.lower().endswith("buckets")
    )
    assert len(found) == 1, found


def test_export_reads_the_profile_and_imports_neither_driver() -> None:
    """harness export works from the frozen Profile (and the engine's pure policy core): a
    manifest never depends on running the simulation or the proxy."""
    bad = {
        path: sorted(
            m
            for m in _imports(tree)
            if any(_under(m, p) for p in ("harness.sim", "harness.live", "harness.cli"))
        )
        for path, tree in _modules().items()
        if path.startswith("export/")
    }
    assert bad and {k: v for k, v in bad.items() if v} == {}


def test_the_wire_owner_imports_the_standard_library_and_orjson_only() -> None:
    """harness.wire is imported by the stub, the proxy, the load generator's process and the
    probe: it reaches no other part of harness (but the token rule) and no other library."""
    import sys

    allowed = {"harness.ground.text_tokens"}
    bad = {}
    for path, tree in _modules().items():
        if not path.startswith("wire/"):
            continue
        tops: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                tops.add(node.module)
        mods = {m for m in _imports(tree) if not _under(m, "harness.wire") and m not in allowed}
        mods |= {
            m
            for m in tops
            if not m.startswith("harness")
            and m.split(".")[0] not in sys.stdlib_module_names
            and m != "orjson"
        }
        if mods:
            bad[path] = sorted(mods)
    assert bad == {}


def test_the_ground_imports_nothing_else_of_harness() -> None:
    """harness.ground is the floor every room stands on: its modules import the standard
    library (and each other) only, so any room, the stub included, may import them."""
    bad = {}
    for path, tree in _modules().items():
        if path.startswith("ground/"):
            mods = {m for m in _imports(tree) if not _under(m, "harness.ground")}
            if mods:
                bad[path] = sorted(mods)
    assert bad == {}


# -- the layers, over the whole package ----------------------------------------------------------
# Bottom-up: a module imports its own layer or a lower one. Every import counts: module level,
# function level and under TYPE_CHECKING. ``from P import name`` counts as importing the
# module ``P.name`` when there is one (the package P itself otherwise).
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "harness",
        "harness.ground",  # small helpers any room imports; nothing else of harness
        "harness.serve",  # uvicorn for the stub and the proxy
        "harness.wire",
        "harness.bundled_profiles",
    ),
    ("harness.profile",),  # the profile, its schema and its threshold grammar
    ("harness.upstream_model",),  # how an endpoint behaves (sim and stub)
    ("harness.engine", "harness.stub"),  # the sans-I/O engine; the stub beside it
    ("harness.workload",),  # arrivals are the engine's Arrived events
    ("harness.recording",),  # the hot path's records: the decision log, the collector
    ("harness.results", "harness.export", "harness.fit"),  # the summary and the verdict
    ("harness.review", "harness.render"),  # comparing results; drawing them for people
    ("harness.run_core",),  # engine + collector + log -> the summary, for both drivers
    ("harness.sim", "harness.live"),
    ("harness.batch",),  # running many simulations: the pool, chunks, the Dask cluster
    ("harness.search",),  # sweep's and tune's plans and judgement, a library for the commands
    ("harness.cli", "harness.__main__"),
)
# The imports allowed to run up a layer, each with its reason.
UPWARD = {
    ("harness", "harness.engine.core"): (
        "harness.compiled() asks whether the engine in use is "
        "the mypyc build (a function-level import, for --version and the summary's meta)"
    ),
}


def _package_modules() -> dict[str, Path]:
    import harness.bundled_profiles
    import harness.stub

    out: dict[str, Path] = {}
    for base, pkg in (
        (ROOT, "harness"),
        (Path(harness.stub.__file__).parent, "harness.stub"),
        (Path(harness.bundled_profiles.__file__).parent, "harness.bundled_profiles"),
    ):
        for p in base.rglob("*.py"):
            parts = [x for x in p.relative_to(base).with_suffix("").parts if x != "__init__"]
            out[".".join([pkg, *parts])] = p
    return out


def _graph() -> dict[str, set[str]]:
    mods = _package_modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                names = [n for n in subs if n in mods]
                if len(names) < len(subs):
                    names.append(node.module)
            else:
                continue
            deps.update(o for n in names if n.startswith("harness") and (o := owner(n)))
        graph[mod] = deps - {mod}
    return graph


def _layer(mod: str) -> int | None:
    best: tuple[int, int] | None = None
    for i, names in enumerate(LAYERS):
        for n in names:
            if (mod == n or mod.startswith(n + ".")) and (best is None or len(n) > best[1]):
                best = (i, len(n))
    return None if best is None else best[0]


def test_every_module_has_a_layer_and_imports_none_above_it() -> None:
    graph = _graph()
    assert sorted(m for m in graph if _layer(m) is None) == []
    up = sorted(
        (m, d)
        for m, deps in graph.items()
        for d in deps
        if (_layer(d) or 0) > (_layer(m) or 0) and (m, d) not in UPWARD
    )
    assert up == []


def test_no_import_cycles_in_the_package() -> None:
    """Tarjan's strongly connected components over every import: none has two modules."""
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_live_rooms_keep_to_their_process() -> None:
    """Inside live/: the proxy and the load generator never import each other, and the
    transport imports no other part of live/ (Locust and gevent stay in load/:
    tests/live/load/test_imports.py)."""
    graph = _graph()

    def room(m: str) -> str | None:
        parts = m.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "live" else None

    crossings = {
        (room(m), room(d))
        for m, deps in graph.items()
        for d in deps
        if room(m) and room(d) and room(m) != room(d)
    }
    assert not crossings & {("proxy", "load"), ("load", "proxy")}
    assert not {c for c in crossings if c[0] == "transport"}
    assert {"proxy", "transport", "load", "run"} <= {room(m) for m in graph if room(m)}


def test_search_is_a_library_below_the_commands_and_batch_below_search() -> None:
    """search/ (plans and judgement) imports nothing of the command layer; batch/ (running many
    simulations) imports neither search/ nor the commands; every command lives in cli/."""
    bad = {
        path: sorted(m for m in _imports(tree) if any(_under(m, p) for p in banned))
        for path, tree in _modules().items()
        for room, banned in (
            ("search/", ("harness.cli", "harness.commands")),
            ("batch/", ("harness.cli", "harness.search")),
        )
        if path.startswith(room)
    }
    assert {k: v for k, v in bad.items() if v} == {}
    assert not list((ROOT / "commands").glob("*.py"))  # (a checkout may keep __pycache__/)
    assert not [p for p in _modules() if p.endswith("/command.py")]
