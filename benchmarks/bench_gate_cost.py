"""The gate's cost on a paired run-bench (issue 27: goal ≤ 1.15x): helix at HEAD against helix
before the gate (a git worktree of ``--old-ref``), the same paired ``run-bench`` of the softmax
example's round 1 against its baseline, interleaved old/new, in fresh processes. Prints the
median wall time of each and the ratio (median of per-pair ratios, min-max).

    python3 benchmarks/bench_gate_cost.py [--old-ref a62d19c] [--pairs 5] [--backend cpu]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def workspace(dest: Path, helix_root: Path, backend: str) -> Path:
    shutil.copytree(ROOT / "examples" / "softmax", dest)
    run(helix_root, dest, backend, "prepare-baseline", ".")
    (dest / "opt-round-1").mkdir()
    shutil.copy(dest / "candidates" / "round-1.py", dest / "opt-round-1" / "opt_softmax.py")
    return dest


def run(helix_root: Path, ws: Path, backend: str, *args: str) -> float:
    paths = [str(helix_root), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), HELIX_BACKEND=backend)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "helix_engine", *args], cwd=ws, env=env, capture_output=True,
                          text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{helix_root}: helix {' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old-ref", default="a62d19c", help="helix before the gate")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--old-tree", type=Path, default=None,
                        help="helix before the gate as a folder (`git archive REF | tar -x -C DIR`), where no git is")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="helix-gate-cost-"))
    old_root = args.old_tree.resolve() if args.old_tree else scratch / "old-helix"
    if args.old_tree is None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_root), args.old_ref],
                       check=True, capture_output=True)
    try:
        roots = {"old": old_root, "new": ROOT}
        spaces = {k: workspace(scratch / f"ws-{k}", root, args.backend) for k, root in roots.items()}
        bench = ("run-bench", "--operator-file", "opt-round-1/opt_softmax.py", "--baseline-operator-file",
                 "baseline/softmax.py")
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i in range(args.pairs):
            for k in (("old", "new") if i % 2 == 0 else ("new", "old")):
                times[k].append(run(roots[k], spaces[k], args.backend, *bench))
        ratios = [n / o for n, o in zip(times["new"], times["old"], strict=True)]
        load = os.getloadavg()[0]
        print(f"paired run-bench, {args.backend}, {args.pairs} pairs interleaved (load {load:.1f}):")
        for k in ("old", "new"):
            print(f"  {k:3} ({args.old_ref if k == 'old' else 'HEAD'}): median {statistics.median(times[k]):.2f} s "
                  f"[{min(times[k]):.2f}-{max(times[k]):.2f}]")
        print(f"  gate cost: {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] (goal <= 1.15x)")
    finally:
        if args.old_tree is None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_root)],
                           capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
