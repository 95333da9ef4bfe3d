"""The package layout: no module is too long, and the modules import each other without cycles.

The import graph counts every ``import`` / ``from ... import`` of a lakesdk module at any depth
(inside functions too, since an import inside a function only hides a cycle), resolves relative
imports, and counts an import of a package as an import of its ``__init__``.  Imports under
``if TYPE_CHECKING:`` count too: a module that names another's class in its signatures depends
on it as much as one that calls it, and two modules typing each other cannot be read, tested or
moved apart.  Where a module needs only a few attributes of an object from a later layer (or of
a module that imports it), it types it as a ``Protocol`` of its own layer instead (the engine's
``EngineContext``, the markers' ``ConflictDetector``, the handle parts' ``TableHandle``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakesdk"
MAX_LINES = 600
# Modules still over the limit (none): a module that outgrows it is split, not listed here.
TOO_LONG_FOR_NOW: set[str] = set()

# ``lakesdk/__init__`` re-exports names lazily from the modules below it, which may import it.
ALLOWED_PACKAGES: tuple[set[str], ...] = ()
ALLOWED_MODULES = {"lakesdk"}

# The layers (docs/architecture.md), each importing only from the layers before it.
LAYERS = [
    ["lakesdk.exceptions", "lakesdk._display", "lakesdk._progress", "lakesdk._faults", "lakesdk._lru"],
    ["lakesdk.config", "lakesdk.storage"],
    ["lakesdk.format"],
    ["lakesdk.timeline"],
    ["lakesdk.merge", "lakesdk.markers"],
    ["lakesdk.concurrency"],
    ["lakesdk.engine"],
    ["lakesdk.commit"],
    ["lakesdk.read"],      # read planning takes a TableContext; the engine executes its plans
    ["lakesdk.services"],
    ["lakesdk.table"],
    ["lakesdk.streaming"],
    ["lakesdk.widgets"],
    ["lakesdk.cli", "lakesdk.testing", "lakesdk.spark", "lakesdk.__main__"],
]
# Upward imports that stay, each a lazy hook from a handle to the widgets showing it
# (``t.widgets``, ``display(t)``, ``sink.widget()``): the widgets import nothing back from them,
# not even for types (they type a table as ``lakesdk.commit.context.TableHandle``).
UPWARD = {("lakesdk.table.table", "lakesdk.widgets"), ("lakesdk.streaming.kafka.sink", "lakesdk.widgets.kafka_monitor")}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lakesdk modules ``name`` (at ``path``) imports."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> None:
        # the longest lakesdk module that ``target`` names (a name inside a module counts as the module)
        while target:
            if target in modules:
                found.add(target)
                return
            target = target.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lakesdk":
                    resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] == "lakesdk":
                for alias in node.names:
                    full = f"{module}.{alias.name}"
                    if full in modules:
                        found.add(full)
                    else:
                        resolve(module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def _package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _allowed_edge(a: str, b: str) -> bool:
    if a in ALLOWED_MODULES or b in ALLOWED_MODULES:
        return True
    pair = {_package_of(a), _package_of(b)}
    return any(pair == allowed for allowed in ALLOWED_PACKAGES)


def _disallowed_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles left once the allowed edges (between table and services, to and from the
    package root) are taken out of the graph."""
    kept = {a: {b for b in bs if not _allowed_edge(a, b)} for a, bs in graph.items()}
    return _cycles(kept)


def test_no_module_is_too_long():
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            n = sum(1 for _ in f)
        name = path.relative_to(ROOT).as_posix()
        if n > MAX_LINES and name not in TOO_LONG_FOR_NOW:
            long[name] = n
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_import_graph_is_read():
    graph = _graph()
    # a relative import, a function-level import and a package import are all seen
    assert "lakesdk.format" in graph["lakesdk.table.table"] or any(
        m.startswith("lakesdk.format.") for m in graph["lakesdk.table.table"])
    assert graph["lakesdk"], "lakesdk/__init__ imports lakesdk.exceptions"
    # lakesdk/table/preview.py imports ReadPlan under ``if TYPE_CHECKING:`` only
    assert "lakesdk.format.read_plan" in graph["lakesdk.table.preview"]


def test_the_graph_reader_sees_type_checking_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import typing\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                 "    from lakesdk.a import A\nif typing.TYPE_CHECKING:\n    import lakesdk.b\nelse:\n"
                 "    from lakesdk.c import C\n\ndef f():\n    from . import d\n", encoding="utf-8")
    modules = {m: tmp_path / "x.py" for m in ("lakesdk.a", "lakesdk.b", "lakesdk.c", "lakesdk.d", "lakesdk.m")}
    assert _imported("lakesdk.m", f, modules) == {"lakesdk.a", "lakesdk.b", "lakesdk.c", "lakesdk.d"}


def test_no_import_cycle():
    cycles = _disallowed_cycles(_graph())
    assert not cycles, "import cycles among lakesdk modules:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def _layer(module: str) -> int:
    for n, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return n
    raise AssertionError(f"{module} is in no layer of LAYERS: add its package there")


def test_each_layer_imports_only_the_layers_before_it():
    graph = _graph()
    up = sorted((a, b) for a, bs in graph.items() for b in bs
                if a != "lakesdk" and b != "lakesdk" and _layer(b) > _layer(a) and (a, b) not in UPWARD)
    assert not up, "imports of a later layer:\n" + "\n".join(f"{a} -> {b}" for a, b in up)


def test_format_does_no_io():
    """``format/`` is the on-disk grammar: bytes in, values out.  It does not import the
    storage; reading and writing the timeline is ``lakesdk.timeline``'s."""
    graph = _graph()
    assert not {(a, b) for a, bs in graph.items() if a.startswith("lakesdk.format") for b in bs
                if b.startswith("lakesdk.storage")}
    import re
    io = re.compile(r"\bopen\(|\bos\.(remove|rename|replace|makedirs|listdir|walk|unlink)\b|\bshutil\.|"
                    r"\bfsspec\.|\bsocket\.|\burllib\.|\brequests\.")
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sorted((PACKAGE / "format").rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if io.search(line)]
    assert not found, "I/O in lakesdk/format:\n" + "\n".join(found)


def test_the_widgets_import_nothing_of_the_handles():
    """``t.widgets`` and ``display(t)`` import the widgets lazily (``UPWARD``); the widgets take
    the table typed as :class:`lakesdk.commit.context.TableHandle` and import no module of
    ``lakesdk.table``, so that the handles stay free to change."""
    graph = _graph()
    found = sorted((a, b) for a, bs in graph.items() if _package_of(a) == "lakesdk.widgets"
                   for b in bs if _package_of(b) == "lakesdk.table")
    assert not found, "widgets importing lakesdk.table:\n" + "\n".join(f"{a} -> {b}" for a, b in found)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _disallowed_cycles({"lakesdk.table.x": {"lakesdk.services.y"},
                               "lakesdk.services.y": {"lakesdk.table.x"}}) == [["lakesdk.services.y", "lakesdk.table.x"]]


def test_no_module_outside_table_uses_a_private_name_of_table():
    """Services, streaming, widgets and the rest take the table context
    (``lakesdk.commit.context.TableContext``) or the public API, never a handle's insides."""
    import lakesdk.table.table as table_module
    private = {n for n in vars(table_module.Table) if n.startswith("_") and not n.startswith("__")}
    private |= {"_ctx", "_stored_key_encoding"}                  # instance attributes
    private -= {"_repr_html_", "_ipython_display_"}               # IPython's display protocol
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("lakesdk/table/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{rel}:{node.lineno}: .{node.attr}")
    assert private and not found, "private names of Table used outside lakesdk/table:\n" + "\n".join(found)


def _pyspark_imports(path: Path) -> list[int]:
    """Lines of ``path`` importing pyspark (at any depth, under ``if TYPE_CHECKING:`` too;
    a mention in a docstring or comment is no import)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else []
        else:
            continue
        if any(n.split(".")[0] == "pyspark" for n in names):
            lines.append(node.lineno)
    return lines


def test_spark_code_is_under_engine_only():
    """The engine seam: pyspark is imported under ``lakesdk/engine/`` only; the other layers
    reach Spark through the engine's functions (reads, writes, merges, filters, the session)."""
    engine = PACKAGE / "engine"
    found = [f"{p.relative_to(ROOT).as_posix()}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             if engine not in p.parents for n in _pyspark_imports(p)]
    assert not found, "pyspark imported outside lakesdk/engine/:\n" + "\n".join(found)


def test_the_pyspark_import_finder_sees_function_level_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""import pyspark in a docstring"""\n\ndef g():\n    from pyspark.sql import functions as F\n'
                 '    import pyspark.sql.types\n    return F\n', encoding="utf-8")
    assert _pyspark_imports(f) == [4, 5]
