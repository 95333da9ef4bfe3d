"""Every public function and method says what it returns: no ``-> Any`` and no missing return
annotation on the public API.

The public API is what ``import lakesdk as lk`` exposes (``lk.__all__``), the packages users import
from (:data:`PACKAGES`), the modules the API reference documents (the ``::: module`` lines of
docs/api, with their ``members:`` lists), and, transitively, every lakesdk class a public function
or method returns (``t.maintenance`` returns a ``Maintenance``, whose ``plan_clean()`` returns a
``CleanPlan``, ...).  Of each public class, the methods, class and static methods and properties
whose names do not start with an underscore are checked, inherited ones from lakesdk classes too.

``Any`` is allowed only as the value type of a mapping (``dict[str, Any]``: a record of mixed
values); anywhere else in a return annotation it fails, as does a missing annotation.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "api"

# Packages users import names from beside the documented modules.
PACKAGES = ["lakesdk", "lakesdk.table", "lakesdk.storage", "lakesdk.merge", "lakesdk.testing", "lakesdk.spark",
            "lakesdk.streaming.kafka"]
MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}


def documented_modules() -> dict[str, list[str] | None]:
    """The modules the API reference renders (docs/api), each with the members it lists (None: all)."""
    out: dict[str, list[str] | None] = {}
    for page in sorted(DOCS.rglob("*.md")):
        current: str | None = None
        for line in page.read_text().splitlines():
            if line.startswith("::: "):
                current = line[4:].strip()
                out.setdefault(current, None)
            elif current and line.strip().startswith("- ") and line.startswith("        "):
                listed = out[current]
                out[current] = [*(listed or []), line.strip()[2:].strip()]
            elif current and line.strip() and not line.startswith(" "):
                current = None
    return out


def public_names(module: types.ModuleType, members: list[str] | None) -> list[str]:
    if members is not None:
        return members
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [n for n, v in vars(module).items() if not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__]


@functools.cache
def checking_imports(module_name: str) -> dict[str, tuple[str, str | None]]:
    """The names a module imports under ``if TYPE_CHECKING:``: name -> (module, attribute or None)."""
    module = sys.modules[module_name]
    path = getattr(module, "__file__", None)
    out: dict[str, tuple[str, str | None]] = {}
    if not path:
        return out
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    out[alias.asname or alias.name] = (stmt.module, alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    out[alias.asname or alias.name.partition(".")[0]] = (alias.name if alias.asname else
                                                                        alias.name.partition(".")[0], None)
    return out


def resolve(dotted: str, module_name: str) -> Any:
    """The object a name in an annotation of ``module_name`` stands for (None when unknown)."""
    head, *rest = dotted.split(".")
    namespace = vars(sys.modules[module_name])
    if head in namespace:
        obj = namespace[head]
    elif head in checking_imports(module_name):
        mod, attr = checking_imports(module_name)[head]
        try:
            obj = importlib.import_module(mod)
            obj = getattr(obj, attr) if attr else obj
        except (ImportError, AttributeError):
            return None
    else:
        return None
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


def annotation_names(text: str) -> Iterator[str]:
    """The dotted names an annotation (as written) mentions, quoted forward references included."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from annotation_names(node.value)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            try:
                yield ast.unparse(node)
            except Exception:   # pragma: no cover
                continue


def loose_any(text: str) -> bool:
    """Whether ``Any`` appears in a return annotation other than as the value type of a mapping."""
    tree = ast.parse(text, mode="eval")
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] in MAPPINGS:
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(args) == 2:
                allowed.add(id(args[1]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and loose_any(node.value):
            return True
        if (isinstance(node, (ast.Name, ast.Attribute)) and ast.unparse(node).split(".")[-1] == "Any"
                and id(node) not in allowed):
            return True
    return False


def return_text(fn: Callable[..., Any]) -> str | None:
    ann = inspect.get_annotations(fn)
    if "return" not in ann:
        return None
    r = ann["return"]
    return r if isinstance(r, str) else inspect.formatannotation(r)


def callables_of(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The public methods, class and static methods and property getters of a class, inherited
    ones from lakesdk classes included."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("lakesdk"):
            continue
        for name, attr in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            elif isinstance(attr, property):
                attr = attr.fget
            elif isinstance(attr, functools.cached_property):
                attr = attr.func
            if inspect.isfunction(attr):
                yield f"{klass.__qualname__}.{name}", attr


def public_api() -> dict[str, Callable[..., Any]]:
    """Every public function and method: qualified name -> function."""
    found: dict[str, Callable[..., Any]] = {}
    classes: list[type] = []
    seen_classes: set[type] = set()

    def add_class(cls: type) -> None:
        if cls not in seen_classes and cls.__module__.startswith("lakesdk"):
            seen_classes.add(cls)
            classes.append(cls)

    modules = {name: None for name in PACKAGES} | documented_modules()
    for module_name, members in modules.items():
        module = importlib.import_module(module_name)
        for name in public_names(module, members):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                add_class(obj)
            elif inspect.isfunction(obj) and obj.__module__.startswith("lakesdk"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
            elif inspect.ismodule(obj):
                for sub in public_names(obj, None):
                    value = getattr(obj, sub)
                    if inspect.isfunction(value):
                        found[f"{value.__module__}.{value.__qualname__}"] = value
                    elif inspect.isclass(value):
                        add_class(value)
    done = 0
    pending = list(found.values())
    while True:
        for fn in pending:   # the classes public callables return are public too
            text = return_text(fn)
            if text is None:
                continue
            for dotted in annotation_names(text):
                obj = resolve(dotted, fn.__module__)
                if inspect.isclass(obj):
                    add_class(obj)
        if done == len(classes):
            return found
        pending = []
        for cls in classes[done:]:
            for qual, fn in callables_of(cls):
                key = f"{fn.__module__}.{qual}"
                if key not in found:
                    found[key] = fn
                    pending.append(fn)
        done = len(classes)


def problems(api: dict[str, Callable[..., Any]]) -> list[str]:
    out = []
    for name, fn in sorted(api.items()):
        text = return_text(fn)
        if text is None:
            out.append(f"{name}: no return annotation")
        elif loose_any(text):
            out.append(f"{name}: -> {text}")
    return out


def test_every_public_function_and_method_says_what_it_returns():
    bad = problems(public_api())
    assert not bad, f"{len(bad)} public functions and methods return Any or say nothing:\n" + "\n".join(bad)


def test_the_walk_reaches_the_namespaces_and_what_they_return():
    api = public_api()
    for name in ["lakesdk.table.lake.Lake.table", "lakesdk.table.lake.open_table", "lakesdk.table.table.Table.upsert",
                 "lakesdk.table.query.Query.to_pandas", "lakesdk.table.namespaces.Maintenance.compact",
                 "lakesdk.table.namespaces.Inspect.check", "lakesdk.read.check.CheckReport.by_name",
                 "lakesdk.services.clean.CleanPlan.to_pandas", "lakesdk.widgets.TableWidgets.timeline",
                 "lakesdk.table.merge.MergeBuilder.execute", "lakesdk.spark.register"]:
        assert name in api, name
    from lakesdk.table.namespaces import Inspect, Maintenance
    for cls in (Maintenance, Inspect):
        for name in dir(cls):
            if not name.startswith("_"):
                assert f"lakesdk.table.namespaces.{cls.__name__}.{name}" in api, name


def test_the_check_finds_any_and_missing_annotations():
    def untyped(x):   # type: ignore[no-untyped-def]
        return x

    def loose() -> Any: ...

    def in_a_list() -> list[Any]: ...

    def optional() -> Any | None: ...

    def record() -> dict[str, Any]: ...

    def quoted() -> "list[Any]": ...

    api = {f.__name__: f for f in (untyped, loose, in_a_list, optional, record, quoted)}
    assert problems(api) == ["in_a_list: -> list[Any]", "loose: -> Any", "optional: -> Any | None",
                             "quoted: -> 'list[Any]'", "untyped: no return annotation"]


def test_type_checkers_see_the_names_lakesdk_imports_lazily():
    """``lk.open_table`` and the other names ``lakesdk.__getattr__`` imports on first use are
    imported under ``if TYPE_CHECKING:`` too, from the same module: without that a type checker
    sees ``__getattr__``'s ``Any`` and every call on a table goes unchecked."""
    import lakesdk
    imports = checking_imports("lakesdk")
    for name, module in lakesdk._LAZY.items():
        assert imports.get(name) == (module, name), name
    for name, module in lakesdk._SUBMODULES.items():
        assert imports.get(name) == (module.rpartition(".")[0], name), name
