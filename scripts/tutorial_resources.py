"""Measure what each tutorial needs: its peak memory and its time, top to bottom.

    python scripts/tutorial_resources.py [--quick] [--stderr] [notebooks/NAME.ipynb ...]   (default: every notebook)

Each notebook runs in a fresh kernel (nbclient, as ``scripts/run_notebooks.py`` runs them),
in a temporary copy of ``notebooks/`` (its lakes are relative folders: they go away with the
copy), one notebook at a time. Every 0.2 s (and after each cell) the resident memory (RSS) of
the kernel process and of all its descendants is summed: Spark's JVM is a child of the
kernel, and so are the processes a tutorial starts (Spark's Python workers, a writer it
kills, a local Kafka broker). The peak of that sum and the wall time from the kernel's start
to the last cell's end are what a tutorial needs.

Beside them: the peak of the summed PSS (proportional set size: a page that processes share,
as a forked Python worker shares its parent's, counts once in all, where the RSS counts it in
each); whether a JVM ran ("Spark"); what the kernel still held after the last cell (a kernel
left running keeps it); and "in order, kernels left running": the peaks of the notebooks so
far added up, what a learner needs who opens the tutorials one after another and never shuts
a kernel down (an upper bound: a kernel that finished holds what it held at the end).

The kernel imports lakesdk from this checkout (its folder is put first on ``PYTHONPATH``).
The figures depend on the machine and its load: measure on a quiet one.

``--quick`` runs the quickstart only (unless notebooks are named): a check of the script.
``--stderr`` prints what the cells wrote on stderr (where Spark's log lines would show).

The last line reads ``tutorial_resources: <name>=<peak MB>/<seconds>s ... max_peak_mb=<MB>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
INTERVAL_S = 0.2
MB = 1024 * 1024

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is in the dev group; /proc does the same on Linux
    psutil = None


def _pss_proc(pid: int) -> int:
    """The proportional set size of ``pid`` in bytes (0 when /proc does not tell)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _tree_proc(pid: int) -> list[tuple[int, str, int, int]]:
    """(pid, name, rss, pss) of ``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, int]] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm") as f:
                rss = int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        info[int(entry)] = (name, rss)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in info:
            out.append((p, *info[p], _pss_proc(p)))
            todo.extend(children.get(p, ()))
    return out


def process_tree(pid: int) -> list[tuple[int, str, int, int]]:
    """(pid, name, rss, pss) in bytes of ``pid`` and of every descendant still running. The
    PSS counts a page shared by n processes (a forked Python worker and its parent) as 1/n in
    each; 0 where the system does not tell."""
    if psutil is None:
        return _tree_proc(pid)
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            full = p.memory_full_info()
            out.append((p.pid, p.name(), full.rss, getattr(full, "pss", 0)))
        except psutil.AccessDenied:
            try:
                out.append((p.pid, p.name(), p.memory_info().rss, 0))
            except psutil.Error:
                continue
        except psutil.Error:   # ended between the listing and the read
            continue
    return out


@dataclass
class Sampler:
    """Samples the memory of a process tree every ``INTERVAL_S`` in a thread, until stopped."""

    pid: int | None = None
    peak: int = 0                   # the greatest sum of the RSS
    peak_pss: int = 0               # the greatest sum of the PSS
    java: bool = False              # a JVM ran in the tree: the notebook started Spark
    processes: int = 0              # the most processes seen at once
    at_peak: dict[str, tuple[int, int]] = field(default_factory=dict)   # name -> (processes, bytes) at the peak
    last: int = 0                   # the sum of the RSS at the last sample
    _stop: threading.Event = field(default_factory=threading.Event)
    _mutex: threading.Lock = field(default_factory=threading.Lock)   # the thread and the cell hook both sample
    _thread: threading.Thread | None = None

    def start(self, pid: int) -> None:
        self.pid = pid
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        if self.pid is None:
            return
        with self._mutex:
            self._sample(self.pid)

    def _sample(self, pid: int) -> None:
        tree = process_tree(pid)
        total = self.last = sum(rss for _, _, rss, _ in tree)
        self.peak_pss = max(self.peak_pss, sum(pss for *_, pss in tree))
        if total > self.peak:
            self.peak, self.at_peak = total, {}
            for _, name, rss, _ in tree:
                n, b = self.at_peak.get(name, (0, 0))
                self.at_peak[name] = (n + 1, b + rss)
        self.processes = max(self.processes, len(tree))
        self.java = self.java or any(name == "java" for _, name, *_ in tree)

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.sample()

    def stop(self) -> None:
        self.sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class Measure:
    name: str
    peak_mb: float
    pss_mb: float
    seconds: float
    spark: bool
    processes: int
    end_mb: float                   # what the kernel's tree still held after the last cell
    at_peak: dict[str, tuple[int, int]]
    stderr: list[str] = field(default_factory=list)   # what the cells wrote on stderr


def measure(path: Path) -> Measure:
    """Run ``path`` top to bottom in a fresh kernel, in a temporary copy of its folder."""
    nb = nbformat.read(path, as_version=4)
    sampler = Sampler()
    with tempfile.TemporaryDirectory(prefix="lakesdk-tutorial-") as tmp:
        work = Path(tmp) / "notebooks"
        shutil.copytree(path.parent, work, ignore=shutil.ignore_patterns("*-lake", ".ipynb_checkpoints"))
        client = NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=False,
                                resources={"metadata": {"path": str(work)}})

        def started(**_: object) -> None:     # the kernel runs: sample it from here on
            process = getattr(client.km.provisioner, "process", None) if client.km else None   # a local kernel
            if process is not None:
                sampler.start(process.pid)
        end = [0.0]

        def cell_done(**_: object) -> None:    # what the tree holds once the cell has run
            sampler.sample()
            end[0] = sampler.last / MB
        client.on_notebook_start = started
        client.on_cell_executed = cell_done
        t0 = time.perf_counter()
        try:
            client.execute()
        finally:
            sampler.stop()
        seconds = time.perf_counter() - t0
    stderr = [f"[{i}] {o.text}" for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "stream" and o.get("name") == "stderr"]
    return Measure(path.stem, sampler.peak / MB, sampler.peak_pss / MB, seconds, sampler.java, sampler.processes,
                   end[0], sampler.at_peak, stderr)


def table(rows: list[Measure]) -> str:
    head = ("notebook", "Spark", "peak MB (RSS)", "peak MB (PSS)", "minutes", "held at the end (MB)",
            "in order, kernels left running (MB)")
    lines, total = [], 0.0
    for m in rows:
        total += m.peak_mb
        lines.append((m.name, "yes" if m.spark else "no", f"{m.peak_mb:.0f}", f"{m.pss_mb:.0f}",
                      f"{m.seconds / 60:.1f}", f"{m.end_mb:.0f}", f"{total:.0f}"))
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [head, *lines])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quickstart only (unless notebooks are named)")
    ap.add_argument("--stderr", action="store_true", help="print what the cells wrote on stderr (cell index first)")
    ap.add_argument("notebooks", nargs="*", type=Path)
    a = ap.parse_args(argv)
    paths = [p.resolve() for p in a.notebooks] or (
        [NOTEBOOKS / "01_quickstart.ipynb"] if a.quick else sorted(NOTEBOOKS.glob("*.ipynb")))
    # the kernel (and the processes it starts) import lakesdk from this checkout
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    rows = []
    for p in paths:
        m = measure(p)
        rows.append(m)
        parts = ", ".join(f"{name} x{n} {b / MB:.0f}" for name, (n, b) in sorted(m.at_peak.items(), key=lambda x: -x[1][1]))
        print(f"{m.name}: {m.peak_mb:.0f} MB peak ({parts}), {m.seconds:.0f} s", flush=True)
        if a.stderr:
            print("".join(m.stderr), end="", flush=True)
    print()
    print(table(rows))
    print("tutorial_resources: " + " ".join(f"{m.name}={m.peak_mb:.0f}/{m.seconds:.0f}s" for m in rows)
          + f" max_peak_mb={max(m.peak_mb for m in rows):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
