"""`helix status` on a generated 200-round, 20-case workspace.

Figures (each the median of 5 runs, after one warm-up):
  * `python3 -m helix_engine status --json` end to end (a fresh process: imports + load + print),
  * the imports alone (the CLI parser plus the status modules, as `helix status` loads them),
  * `load_workspace` in process,
  * `reload` after one round's perf file changes (vs the full load, measured in the same run).
The upstream figures (0.38 s for `helix status` on the same kind of workspace, 0.27 s of it
imports) are the ones quoted in issue 2; they are constants here, not re-measured.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

UPSTREAM_STATUS_S = 0.38  # issue 2: upstream `helix status` on a 200-round, 20-case workspace
UPSTREAM_IMPORTS_S = 0.27  # issue 2: of which imports
ROUNDS, CASES, REPEATS = 200, 20, 5
ISSUE_NOTE = "reference is the figure quoted in issue 2, not re-measured here"


def _median(fn: Callable[[], object], repeats: int = REPEATS) -> tuple[float, float]:
    """Median wall time and median CPU time (this process + children, user + sys)."""
    fn()  # warm-up: page cache, .pyc files
    walls, cpus = [], []
    for _ in range(repeats):
        cpu0, wall0 = _cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - wall0)
        cpus.append(_cpu() - cpu0)
    return statistics.median(walls), statistics.median(cpus)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _note(cpu: float, extra: str = ISSUE_NOTE) -> str:
    return f"{extra}; CPU time {cpu * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f} when measured"


def _subprocess(argv: list[str]) -> Callable[[], object]:
    def run() -> None:
        proc = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()[-500:]}")
    return run


def run() -> list[dict]:
    from helix_engine.workspace.snapshot import load_workspace, reload
    from tests.builders import generate_large_workspace, write_perf

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="helix-bench-status-") as tmp:
        ws = generate_large_workspace(Path(tmp), rounds=ROUNDS, cases=CASES)
        status, status_cpu = _median(_subprocess(["-m", "helix_engine", "status", str(ws), "--json"]))
        rows.append({"benchmark": "status", "figure": f"helix status --json, {ROUNDS} rounds x {CASES} cases "
                     "(fresh process)", "value": status, "unit": "s",
                     "compare_to": f"upstream helix status ({UPSTREAM_STATUS_S} s)",
                     "ratio": status / UPSTREAM_STATUS_S, "note": _note(status_cpu)})
        imports, imports_cpu = _median(_subprocess(["-c", "import helix_engine.cli as c; c.build_parser(); "
                                                   "import helix_engine.status"]))
        rows.append({"benchmark": "status", "figure": "imports of helix status (fresh process)",
                     "value": imports, "unit": "s",
                     "compare_to": f"upstream imports ({UPSTREAM_IMPORTS_S} s)",
                     "ratio": imports / UPSTREAM_IMPORTS_S, "note": _note(imports_cpu)})
        full, full_cpu = _median(lambda: load_workspace(ws))
        rows.append({"benchmark": "status", "figure": f"load_workspace in process ({ROUNDS} rounds)",
                     "value": full, "unit": "s",
                     "compare_to": f"upstream non-import time ({UPSTREAM_STATUS_S - UPSTREAM_IMPORTS_S:.2f} s)",
                     "ratio": full / (UPSTREAM_STATUS_S - UPSTREAM_IMPORTS_S),
                     "note": _note(full_cpu, ISSUE_NOTE + " (0.38 s - 0.27 s)")})
        snap = load_workspace(ws)
        perf = ws / "opt-round-100" / "opt_add_perf.txt"
        labels = [r.case_label for r in snap.rounds[100].perf]
        flip = [0]

        def one_change() -> None:
            flip[0] += 1
            write_perf(perf, {lab: 10.0 + flip[0] % 2 + i for i, lab in enumerate(labels)})
            reload(snap, [perf])

        changed, changed_cpu = _median(one_change)
        rows.append({"benchmark": "status", "figure": "reload after one round perf file changes",
                     "value": changed, "unit": "s", "compare_to": "full load_workspace (same run)",
                     "ratio": changed / full, "note": _note(changed_cpu, "includes rewriting the perf "
                     "file; best round, comparisons and warnings are recomputed from memory")})
    return rows


if __name__ == "__main__":
    for row in run():
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        print(f"{row['figure']}: {row['value'] * 1000:.1f} ms  vs {row['compare_to']}: {ratio}  ({row['note']})")
