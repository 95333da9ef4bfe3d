"""Package metadata a user relies on: every extra an error message or docstring names exists,
one version, an SPDX licence, fault hooks that do nothing unless a test switches them on, and
declared ranges that resolve fresh (``pip install ".[all]"`` and ``uv lock --upgrade``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

import lakesdk
from lakesdk import _faults

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])


def _named_extras() -> dict[str, set[str]]:
    """``{extra: {file, ...}}`` for every ``lakesdk[...]`` and ``MissingDependencyError(pkg, extra, ...)``
    in the package's source and docs."""
    found: dict[str, set[str]] = {}
    files = [*(ROOT / "lakesdk").rglob("*.py"), ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for f in files:
        text = f.read_text(encoding="utf-8")
        names = [n.strip() for m in re.finditer(r"lakesdk\[([a-z0-9_,\- ]+)\]", text) for n in m.group(1).split(",")]
        names += re.findall(r"MissingDependencyError\(\s*\"[^\"]+\",\s*\"([^\"]*)\"", text)
        for n in names:
            if n:
                found.setdefault(n, set()).add(str(f.relative_to(ROOT)))
    return found


def test_every_extra_named_in_the_code_exists():
    named = _named_extras()
    assert {"s3", "notebook", "zookeeper", "polars", "kafka", "connect"} <= set(named)   # the scan finds them
    missing = {n: sorted(fs) for n, fs in named.items() if n not in EXTRAS}
    assert not missing, f"extras named but not defined in pyproject.toml: {missing}"


def test_storage_extras_exist():
    from lakesdk.storage.fs import _EXTRAS
    assert {extra for _, extra in _EXTRAS.values()} <= EXTRAS
    assert "all" in EXTRAS   # the fall-back for other fsspec protocols


def test_all_holds_every_user_extra():
    (spec,) = PYPROJECT["project"]["optional-dependencies"]["all"]
    inner = set(re.fullmatch(r"lakesdk\[(.*)\]", spec).group(1).split(","))
    assert inner == EXTRAS - {"all"}


def test_development_tools_are_dependency_groups_not_extras():
    groups = PYPROJECT["dependency-groups"]
    assert not EXTRAS & {"test", "bench", "docs", "dev", "lint"}
    assert {"test", "bench", "docs", "lint", "dev"} <= set(groups)
    for name, reqs in groups.items():
        for r in reqs:
            assert isinstance(r, dict) or "==" not in r, f"{name}: {r} is a pin; uv.lock pins"
    assert (ROOT / "uv.lock").is_file()


def _group_requirements(name: str) -> set[str]:
    """The package names a dependency group asks for, its included groups' too."""
    out: set[str] = set()
    for r in PYPROJECT["dependency-groups"][name]:
        if isinstance(r, dict):
            out |= _group_requirements(r["include-group"])
        else:
            out.add(_norm(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0]))
    return out


def test_setup_installs_jupyterlab():
    """``make setup`` installs the ``dev`` group from uv.lock: JupyterLab is in it (and in the
    lock), so a checkout opens the notebooks without installing anything else."""
    assert "--group dev" in _recipe_line("uv sync")
    assert "jupyterlab" in _group_requirements("dev")
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    assert "jupyterlab" in {_norm(p["name"]) for p in lock["package"]}


def _recipe_line(command: str) -> str:
    """The Makefile's one recipe line running ``command``."""
    (line,) = [ln for ln in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
               if command in ln and ln.startswith("\t")]
    return line

def test_core_dependency_error_names_no_extra():
    e = lakesdk.MissingDependencyError("pyspark", "", "Running Spark jobs")
    assert "lakesdk[" not in str(e) and "pip install pyspark" in str(e)
    assert "pip install 'lakesdk[s3]'" in str(lakesdk.MissingDependencyError("s3fs", "s3", "Storage"))


def test_one_version_source():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "lakesdk.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc|\.dev)?\d*", lakesdk.__version__)


def test_every_data_file_of_the_package_is_installed():
    """A file under lakesdk/ that is not Python (schemas, the Spark driver's log configuration)
    reaches an installed package only when pyproject.toml's package-data names it."""
    from fnmatch import fnmatch
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["lakesdk"]
    package = ROOT / "lakesdk"
    built = {m["name"].split(".")[-1] for m in PYPROJECT["tool"]["setuptools"].get("ext-modules", [])}
    sources = {s for m in PYPROJECT["tool"]["setuptools"].get("ext-modules", []) for s in m["sources"]}
    data = [f.relative_to(package).as_posix() for f in package.rglob("*")
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts
            and f.relative_to(ROOT).as_posix() not in sources                  # an extension's C source
            and not (f.suffix in (".so", ".pyd") and f.name.split(".")[0] in built)]   # and what it builds
    assert "engine/log4j2.properties" in data
    missing = [f for f in data if not any(fnmatch(f, p) for p in patterns)]
    assert not missing, f"files under lakesdk/ missing from [tool.setuptools.package-data]: {missing}"


def test_the_c_part_is_optional():
    """lakesdk's C part (the bloom filters' hashing) builds where a C compiler is and is skipped
    elsewhere: an install never fails for it (numpy does the same work)."""
    mods = PYPROJECT["tool"]["setuptools"]["ext-modules"]
    assert mods and all(m.get("optional") is True for m in mods)
    for m in mods:
        assert all((ROOT / src).is_file() for src in m["sources"]), m
    keys = [k["file"] for k in PYPROJECT["tool"]["uv"]["cache-keys"]]
    assert "pyproject.toml" in keys and any(k.endswith(".c") for k in keys)   # uv builds it again when it changes


def test_licence_is_an_spdx_expression_with_its_file():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    for pattern in PYPROJECT["project"]["license-files"]:
        assert list(ROOT.glob(pattern)), pattern


FAULT_ENV = ("LAKESDK_CRASH_AT", "LAKESDK_CRASH_PID", "LAKESDK_FAIL_FIRST_ATTEMPT", "LAKESDK_FAULT_LOG")
POINTS = ("after_requested", "after_markers", "mid_data_file", "after_data", "during_commit", "after_commit")


def test_fault_hooks_are_inert_without_their_environment_switch(monkeypatch, tmp_path):
    for name in FAULT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    for point in POINTS:
        assert not _faults.armed(point)
        _faults.crash_point(point)        # returns: no hold, nothing armed
    assert not _faults.fail_first_attempt()
    _faults.record("event")
    assert list(tmp_path.iterdir()) == []
    # armed only for the very point named
    monkeypatch.setenv("LAKESDK_CRASH_AT", "after_commit")
    assert _faults.armed("after_commit") and not _faults.armed("after_data")


def test_nothing_in_the_package_sets_the_fault_switches():
    for f in (ROOT / "lakesdk").rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        for name in FAULT_ENV:
            for m in re.finditer(rf"environ\[[\"']{name}[\"']\]\s*=|setenv\([\"']{name}|environ\.setdefault\([\"']{name}", text):
                pytest.fail(f"{f.relative_to(ROOT)} sets {name}: {m.group(0)}")


def test_pandas_has_no_cap_for_users():
    """Users may have pandas 2 or 3 (``make test-pandas3`` runs the pandas paths on 3); only the
    development lock keeps pandas 2, for pyspark's sake, as a uv constraint outside the metadata."""
    (pandas,) = [d for d in PYPROJECT["project"]["dependencies"] if re.match(r"pandas\b", d)]
    assert "<" not in pandas, pandas
    assert "pandas<3" in PYPROJECT["tool"]["uv"]["constraint-dependencies"]


# -- the declared ranges, resolved fresh from PyPI ----------------------------------------------
PYPI = "https://pypi.org/simple"
# backports for Python 2 that an old release of a dependency may pull in when a resolver backtracks
PY2_ONLY = {"functools32", "futures", "enum34", "subprocess32", "configparser", "typing", "trollius",
            "ordereddict", "backports-functools-lru-cache", "backports-ssl-match-hostname", "pathlib2"}
# what each user extra brings (one package each)
EXTRA_PACKAGES = {"s3": "s3fs", "gcs": "gcsfs", "azure": "adlfs", "zookeeper": "kazoo", "notebook": "ipywidgets",
                  "connect": "grpcio", "kafka": "confluent-kafka", "polars": "polars", "lance": "pylance"}


def _need_pypi() -> None:
    try:
        with urllib.request.urlopen(f"{PYPI}/pip/", timeout=15):
            pass
    except OSError as e:
        pytest.skip(f"PyPI ({PYPI}) is unreachable, so the ranges cannot be resolved fresh: {e}")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.network
def test_pip_install_all_resolves_fresh_without_backtracking(tmp_path):
    """``pip install ".[all]"`` from the source tree, as a user runs it (pip's own defaults, PyPI,
    no machine configuration), resolves at once: pip never reports backtracking, and picks no
    Python-2-era backport."""
    _need_pypi()
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed",
         "--index-url", PYPI, "--report", str(report), ".[all]"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"pip could not resolve lakesdk[all]:\n{log[-4000:]}"
    assert "looking at multiple versions" not in log, f"pip backtracked:\n{log[-4000:]}"
    resolved = {_norm(i["metadata"]["name"]): i["metadata"]["version"]
                for i in json.loads(report.read_text(encoding="utf-8"))["install"]}
    assert "lakesdk" in resolved
    missing = {extra: pkg for extra, pkg in EXTRA_PACKAGES.items() if pkg not in resolved}
    assert not missing, f"extras whose packages lakesdk[all] does not install: {missing}"
    assert set(EXTRA_PACKAGES) == EXTRAS - {"all"}   # this test knows every extra
    assert not PY2_ONLY & set(resolved), sorted(PY2_ONLY & set(resolved))


def _uv() -> str:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (make setup installs it into .venv)")
    return uv


@pytest.mark.network
def test_declared_ranges_resolve_fresh_at_their_newest_and_their_floors():
    """Every range of pyproject.toml (dependencies, extras, dependency groups; every Python from
    3.11) resolves fresh from the index, both at the newest releases and with every direct
    dependency at its floor, so the ranges say what works. Nothing is written: uv.lock moves
    only with ``uv lock``."""
    _need_pypi()
    uv = _uv()
    before = (ROOT / "uv.lock").read_bytes()
    for resolution in ("highest", "lowest-direct"):
        proc = subprocess.run([uv, "lock", "--dry-run", "--upgrade", "--resolution", resolution],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"the declared ranges do not resolve ({resolution}):\n{proc.stderr[-4000:]}"
    assert (ROOT / "uv.lock").read_bytes() == before


def _make_variable(name: str) -> list[str]:
    """A variable of the Makefile (``NAME := ...`` with ``\\`` continuations), split into words."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    (value,) = re.findall(rf"^{name}\s*:=(.*)$", text, flags=re.M)
    return value.split()


def test_binder_requirements_are_the_lock_exported():
    """binder/requirements.txt is ``make binder``'s export of uv.lock (offline: ``--frozen``), so
    Binder runs the notebooks on the versions and hashes the tests use."""
    args = _make_variable("BINDER_EXPORT")
    assert args[:2] == ["export", "--frozen"]
    proc = subprocess.run([_uv(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stored = (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8")
    assert stored == proc.stdout, "binder/requirements.txt is stale: run `make binder`"
    pins = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", stored, flags=re.M))
    assert {"pyspark", "pandas", "ipywidgets", "plotly", "hudi", "confluent-kafka", "noida-db"} <= set(pins)
    assert "--hash=sha256:" in stored and "pytest" not in pins and "lakesdk" not in pins
