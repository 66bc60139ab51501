"""Measure one command as a fresh process, from outside: wall time, CPU time and peak RSS.

Why from outside: ``ru_maxrss`` read inside a child (or RUSAGE_CHILDREN in the parent) counts
the resident set the child inherited from its parent before ``exec`` (Linux folds the old
address space's high-water mark into the new process's), so a 30 MB process started by a 300 MB
benchmark reads 300 MB. Here the command runs under ``/usr/bin/time`` (a ~2 MB parent; its
``%M`` is wait4's peak for that one child), or, where GNU time is missing, its ``VmHWM`` (the
peak of the exec'd address space alone) is polled from /proc every 2 ms; the polled figure is a
lower bound within the last poll, and the row's note says which method was used.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TIME_BIN = "/usr/bin/time"


@dataclass
class Run:
    """One fresh process: wall seconds (measured here), CPU seconds and peak RSS (MiB)."""

    wall_s: float
    cpu_s: float | None
    peak_mib: float
    stdout: str
    method: str


def gnu_time() -> str | None:
    """``/usr/bin/time`` when it is GNU time (``-f`` works); else None (install: apt-get install time)."""
    if not os.access(TIME_BIN, os.X_OK):
        return None
    probe = subprocess.run([TIME_BIN, "-f", "%M", "true"], capture_output=True, text=True, check=False)
    return TIME_BIN if probe.returncode == 0 and probe.stderr.strip().isdigit() else None


def run(argv: Sequence[str], *, cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None,
        poll: bool = False) -> Run:
    """Run ``argv`` once as a fresh process and measure it; raises RuntimeError when it fails.
    ``poll`` forces the /proc polling method (tests compare the two)."""
    timer = None if poll else gnu_time()
    if timer is not None:
        return _timed(timer, argv, cwd, timeout, env)
    return _polled(argv, cwd, timeout, env)


def _timed(timer: str, argv: Sequence[str], cwd: Path | None, timeout: float, env: dict[str, str] | None) -> Run:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        start = time.perf_counter()
        proc = subprocess.run([timer, "-o", out.name, "-f", "%U %S %M", *argv], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        wall = time.perf_counter() - start
        last = (out.read().strip().splitlines() or [""])[-1].split()
    _check(argv, proc.returncode, proc.stderr)
    user, system, kib = float(last[0]), float(last[1]), int(last[2])
    return Run(wall, user + system, kib / 1024, proc.stdout, "GNU time %M (wait4 of the command alone)")


def _polled(argv: Sequence[str], cwd: Path | None, timeout: float, env: dict[str, str] | None) -> Run:
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_kib = 0
    status = Path(f"/proc/{proc.pid}/status")
    out_parts: list[str] = []
    err_parts: list[str] = []
    reader = _drain(proc, out_parts, err_parts)
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kib = max(peak_kib, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        if time.perf_counter() - start > timeout:
            proc.kill()
            raise RuntimeError(f"{' '.join(argv)} ran past {timeout:.0f} s")
        time.sleep(0.002)
    wall = time.perf_counter() - start
    reader.join()
    _check(argv, proc.returncode, "".join(err_parts))
    return Run(wall, None, peak_kib / 1024, "".join(out_parts), "VmHWM polled every 2 ms (a lower bound)")


def _drain(proc: subprocess.Popen, out: list[str], err: list[str]):
    """Read the child's pipes in a thread, so a chatty child never blocks on a full pipe."""
    import threading

    def pump() -> None:
        assert proc.stdout is not None and proc.stderr is not None
        out.append(proc.stdout.read())
        err.append(proc.stderr.read())

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _check(argv: Sequence[str], code: int, stderr: str) -> None:
    if code != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {code}: {stderr.strip()[-800:]}")


def spread(values: Sequence[float], digits: int = 3) -> str:
    """``median (min–max, n=N)`` of a list of figures."""
    fmt = f"{{:.{digits}g}}"
    return (f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))}, "
            f"n={len(values)})")


def load_average() -> str:
    """The 1-minute load average and the core count, for a row's note."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def which_python_script(name: str, python: str) -> str | None:
    """The console script ``name`` installed beside ``python`` (a venv's bin/), else on PATH."""
    beside = Path(python).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
