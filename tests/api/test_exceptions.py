"""The error hierarchy: every exception class of lakesdk is defined in ``lakesdk.exceptions``
(other modules only re-export it), derives from ``LakeError``, takes its data as constructor
arguments, and pickles with its message and fields."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import pytest

import lakesdk
import lakesdk.exceptions as exc_mod
from lakesdk.exceptions import LakeError

PACKAGE = Path(lakesdk.__file__).parent
EXCEPTIONS_PY = PACKAGE / "exceptions.py"


def _modules() -> tuple[list[object], list[str]]:
    """Every module of the lakesdk package that imports here (modules needing an optional
    dependency that is not installed are left out, and listed)."""
    mods, skipped = [], []
    for info in pkgutil.walk_packages(lakesdk.__path__, "lakesdk."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the command line when imported
            continue
        try:
            mods.append(importlib.import_module(info.name))
        except ImportError as e:  # an optional dependency (MissingDependencyError is an ImportError)
            skipped.append(f"{info.name}: {e}")
    return mods, skipped


def _public_errors() -> list[type[BaseException]]:
    return [getattr(exc_mod, n) for n in exc_mod.__all__]


# -- where errors live ----------------------------------------------------------------------------
def test_every_exception_class_is_defined_in_exceptions_and_derives_from_lake_error():
    mods, _ = _modules()
    assert len(mods) > 50
    found: dict[str, type] = {}
    for mod in mods:
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("lakesdk"):
                found[f"{mod.__name__}.{name}"] = obj
    assert found, "no exception classes found"
    wrong = {where: f"{cls.__module__}.{cls.__qualname__}" for where, cls in found.items()
             if cls.__module__ != "lakesdk.exceptions" or getattr(exc_mod, cls.__name__, None) is not cls}
    assert not wrong, f"exception classes defined outside lakesdk.exceptions: {wrong}"
    not_lake = sorted({f"{c.__module__}.{c.__qualname__}" for c in found.values()
                       if not issubclass(c, (LakeError, Warning))})
    assert not not_lake, f"errors not under LakeError: {not_lake}"


def _base_names(node: ast.ClassDef) -> list[str]:
    out = []
    for b in node.bases:
        out.append(b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else "")
    return out


_BUILTIN_ERRORS = {n for n, o in vars(builtins).items() if inspect.isclass(o) and issubclass(o, BaseException)}


def test_no_exception_class_is_defined_outside_exceptions_py_in_the_source():
    """Also classes the import walk cannot see (inside functions or other classes): no class
    statement outside ``exceptions.py`` names a built-in exception or one of lakesdk's errors
    as a base."""
    error_names = _BUILTIN_ERRORS | {n for n, o in vars(exc_mod).items()
                                     if inspect.isclass(o) and issubclass(o, BaseException)}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == EXCEPTIONS_PY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and (set(_base_names(node)) & error_names or any(
                    n.endswith(("Error", "Exception")) for n in _base_names(node))):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert not offenders, f"define these in lakesdk/exceptions.py and re-export them: {offenders}"


def test_exceptions_module_imports_nothing_from_lakesdk():
    """``lakesdk.exceptions`` is the bottom layer: every other module may import it."""
    for node in ast.walk(ast.parse(EXCEPTIONS_PY.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("lakesdk") and node.level == 0, ast.unparse(node)
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("lakesdk") for a in node.names), ast.unparse(node)


def test_all_lists_every_public_error_and_the_package_exports_them():
    public = {n for n, o in vars(exc_mod).items()
              if inspect.isclass(o) and issubclass(o, BaseException) and o.__module__ == "lakesdk.exceptions"
              and not n.startswith("_")}
    assert public == set(exc_mod.__all__)
    assert len(exc_mod.__all__) == len(set(exc_mod.__all__))
    assert len(lakesdk.__all__) == len(set(lakesdk.__all__))
    for name in exc_mod.__all__:
        assert name in lakesdk.__all__ and getattr(lakesdk, name) is getattr(exc_mod, name)


# where the errors were defined before they moved: the names still import from there
OLD_LOCATIONS = {
    "lakesdk.concurrency.lock_base": ["LockError", "LockConfigError", "LockTimeoutError", "LockLostError"],
    "lakesdk.concurrency.locks": ["LockError", "LockConfigError", "LockTimeoutError", "LockLostError"],
    "lakesdk.concurrency.heartbeat": ["HeartbeatError"],
    "lakesdk.concurrency.schema_conflicts": ["SchemaEvolutionConflictError"],
    "lakesdk.format.log_block": ["LogBlockError"],
    "lakesdk.markers.base": ["MarkerError", "InvalidMarkerNameError", "UnsupportedMarkerTypeError",
                             "MarkerServerError", "MarkerAuthError", "MarkerServerUnavailableError"],
    "lakesdk.markers": ["MarkerError", "InvalidMarkerNameError", "UnsupportedMarkerTypeError",
                        "MarkerServerError", "MarkerAuthError", "MarkerServerUnavailableError"],
    "lakesdk.merge.registry": ["MergerNotRegisteredError"],
    "lakesdk.table.merge": ["MergeConflictError"],
    "lakesdk.services.rollback": ["RollbackNotAllowedError"],
    "lakesdk.services.savepoint": ["SavepointError", "RestoreError"],
    "lakesdk.streaming.kafka.events": ["OffsetsFormatError"],
    "lakesdk.streaming.kafka.participant": ["DecodeError"],
    "lakesdk.testing.kafka": ["BrokerNotFoundError", "BrokerStartError"],
}


@pytest.mark.parametrize("module", sorted(OLD_LOCATIONS))
def test_old_import_locations_re_export_the_same_class(module):
    mod = importlib.import_module(module)
    for name in OLD_LOCATIONS[module]:
        assert getattr(mod, name) is getattr(exc_mod, name), f"{module}.{name}"
        assert name in getattr(mod, "__all__", [name]), f"{module}.__all__ lacks {name}"


# the built-in exceptions a user catches them as
BUILTIN_BASES = {
    "LockError": (), "LockConfigError": (ValueError,), "LockTimeoutError": (TimeoutError,),
    "LockLostError": (RuntimeError,), "HeartbeatError": (RuntimeError,),
    "SchemaEvolutionConflictError": (RuntimeError,), "LogBlockError": (ValueError,),
    "MarkerError": (), "InvalidMarkerNameError": (ValueError,), "UnsupportedMarkerTypeError": (ValueError,),
    "MarkerServerError": (ConnectionError,), "MarkerAuthError": (ConnectionError, PermissionError),
    "MarkerServerUnavailableError": (ConnectionError,), "MergerNotRegisteredError": (LookupError,),
    "MergeConflictError": (ValueError,), "RollbackNotAllowedError": (ValueError,),
    "SavepointError": (ValueError,), "RestoreError": (ValueError,), "OffsetsFormatError": (ValueError,),
    "DecodeError": (ValueError,), "BrokerNotFoundError": (ImportError,), "BrokerStartError": (RuntimeError,),
    "TableNotFoundError": (FileNotFoundError,), "TableExistsError": (FileExistsError,),
    "InstantNotFoundError": (KeyError,), "DataFileMissingError": (FileNotFoundError,),
    "StorageError": (OSError,), "MissingDependencyError": (ImportError,), "OptionsError": (ValueError,),
    "UnsupportedFileFeatureError": (ValueError,), "KeyOrderError": (ValueError,),
}


@pytest.mark.parametrize("name", sorted(BUILTIN_BASES))
def test_errors_keep_their_built_in_bases(name):
    cls = getattr(exc_mod, name)
    assert issubclass(cls, LakeError)
    for base in BUILTIN_BASES[name]:
        assert issubclass(cls, base), f"{name} is not a {base.__name__}"


# -- fields and pickling --------------------------------------------------------------------------
# a value for every constructor argument an error takes (add one for a new argument)
SAMPLES = {
    "message": "the error's message",
    "key": "hoodie.write.lock.wait_time_ms",
    "path": "file:///tmp/t/.hoodie/20240101000000000.commit",
    "instant": "20240101000000000",
    "other_instant": "20240101000000001",
    "other_action": "deltacommit",
    "file_groups": (("2024/01", "fid-1"), ("", "fid-2")),
    "held_elsewhere": True,
    "partitions": ("2024/01", "2024/02"),
    "planned": (("2024/01", "fid-3"),),
    "lock_name": "StorageLockProvider(file:///tmp/t)",
    "holder": "host/123/MainThread/abc",
    "waited_s": 1.5,
    "timeout_s": 2.0,
    "attempts": 4,
    "status": 503,
    "name": "my_merger",
    "savepoint": "20240101000000002",
    "package": "some-package",
    "extra": "someextra",
    "feature": "Some feature",
    "searched": ("/venv/bin/noida-db",),
    "column": "rider.tier",
    "column_type": "int64",
    "value_type": "string",
    "table": "trips",
    "columns": ("fare", "Fare"),
    "clause": "matched_update",
}


def _make(cls: type[BaseException]) -> tuple[BaseException, dict[str, object]]:
    """An instance of ``cls`` with every constructor argument set, and the keyword arguments."""
    args, kwargs = [], {}
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        assert p.name in SAMPLES, f"{cls.__name__}({p.name}=...): add a sample value to SAMPLES"
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = SAMPLES[p.name]
        else:
            args.append(SAMPLES[p.name])
    return cls(*args, **kwargs), kwargs


@pytest.mark.parametrize("name", exc_mod.__all__)
def test_fields_are_set_by_the_constructor(name):
    cls = getattr(exc_mod, name)
    err, kwargs = _make(cls)
    for field, value in kwargs.items():
        assert getattr(err, field) == value, f"{name}.{field}"
    if "message" in inspect.signature(cls.__init__).parameters:
        assert str(err) == SAMPLES["message"]
    # without the keyword arguments every field still exists, with its default
    bare = cls(SAMPLES["message"]) if "message" in inspect.signature(cls.__init__).parameters else None
    if bare is not None:
        assert str(bare) == SAMPLES["message"]
        for field in kwargs:
            assert hasattr(bare, field), f"{name}.{field} has no default"


@pytest.mark.parametrize("name", exc_mod.__all__)
def test_every_error_pickles_with_its_fields(name):
    cls = getattr(exc_mod, name)
    err, kwargs = _make(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back.args == err.args and str(back) == str(err)
    assert vars(back) == vars(err)
    for field, value in kwargs.items():
        assert getattr(back, field) == value, f"{name}.{field} did not survive pickling"
    # also the bare form, and after being raised (a traceback attached)
    try:
        raise err
    except LakeError as raised:
        again = pickle.loads(pickle.dumps(raised))
        assert type(again) is cls and str(again) == str(err) and vars(again) == vars(err)


def test_pickle_keeps_the_built_in_fields():
    e = pickle.loads(pickle.dumps(exc_mod.MissingDependencyError("kazoo", "zookeeper", "The ZooKeeper lock")))
    assert e.msg == str(e) and e.package == "kazoo" and e.extra == "zookeeper"
    t = pickle.loads(pickle.dumps(exc_mod.LockTimeoutError("timed out", holder="h", attempts=2)))
    assert str(t) == "timed out" and t.holder == "h" and t.attempts == 2 and isinstance(t, TimeoutError)


def test_early_conflict_fields_from_its_message_alone():
    """Raised inside a Spark task only the message comes back; the fields are parsed from it."""
    msg = ("write 20240101000000003 to 't' conflicts early with commit 20240101000000001, which started earlier; "
           "both write file groups: 2024/01/fid-1, <root>/fid-2. The write stopped before writing that data.")
    e = exc_mod.EarlyConflictError(msg)
    assert (e.other_instant, e.other_action) == ("20240101000000001", "commit")
    assert e.file_groups == (("2024/01", "fid-1"), ("", "fid-2")) and e.partitions == ("", "2024/01")


def test_write_conflict_partitions_default_to_those_of_the_file_groups():
    e = exc_mod.WriteConflictError("x", other_instant="1", file_groups=(("b", "f1"), ("a", "f2"), ("b", "f3")))
    assert e.partitions == ("a", "b") and e.other_instant == "1"
    assert exc_mod.WriteConflictError("x").other_instant is None


# -- no fields bolted on after construction -------------------------------------------------------
def test_no_code_sets_attributes_on_an_error_after_creating_it():
    """``err.field = ...`` after ``err = SomeError(...)`` or ``except ... as err`` hides the
    field from the constructor (and from pickling of errors built elsewhere): pass it in."""
    errors = {n for n, o in vars(exc_mod).items() if inspect.isclass(o) and issubclass(o, BaseException)}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = set()
            for n in ast.walk(fn):
                if isinstance(n, ast.ExceptHandler) and n.name:
                    names.add(n.name)
                elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
                    f = n.value.func
                    callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                    if callee in errors or callee.endswith("Error"):
                        names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
            for n in ast.walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                    n, (ast.AugAssign, ast.AnnAssign)) else []
                for t in targets:
                    for a in ast.walk(t):
                        if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id in names:
                            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{n.lineno} {ast.unparse(n)}")
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
                        and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id in names):
                    offenders.append(f"{path.relative_to(PACKAGE.parent)}:{n.lineno} {ast.unparse(n)}")
    assert not offenders, offenders
