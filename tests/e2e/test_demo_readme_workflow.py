"""The README's "optimization workflow in ten lines", run literally on a fresh copy of the
softmax example (CPU backend): every `helix ...` line exits 0, and the `#` lines (the human or
agent steps) are done the way the demo does them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine import demo
from helix_engine.state.lifecycle import write_round_state

ROOT = Path(__file__).resolve().parents[2]


def _workflow_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The optimization workflow", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_workflow_block_is_ten_lines_of_commands_and_steps() -> None:
    lines = _workflow_lines()
    assert len(lines) == 10
    commands = [line for line in lines if line.startswith("helix ")]
    assert [shlex.split(c.split("  #")[0])[1] for c in commands] == [
        "prepare-baseline", "start-round", "probe-bench", "run-test", "run-bench", "profile-bench",
        "submit-round", "status"]


@pytest.mark.slow
def test_readme_workflow_runs_as_written(tmp_path: Path) -> None:
    ws = tmp_path / "my-softmax"
    shutil.copytree(demo.examples_root() / "softmax", ws, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, HELIX_BACKEND="cpu", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    round_dir = ws / "opt-round-1"
    for line in _workflow_lines():
        if line.lstrip().startswith("#"):
            if "edit opt-round-1/opt_softmax.py" in line:  # the code change and its notes
                shutil.copyfile(ws / "candidates" / "round-1.py", round_dir / "opt_softmax.py")
                with (round_dir / "attempts.md").open("a") as fh:
                    fh.write("\nHypothesis: fuse the three kernels\nPrimary analysis level: pattern triage\n")
            elif "summary.md" in line:  # the round's conclusion
                (round_dir / "summary.md").write_text("# opt-round-1\nParent: baseline\nCurrent best: yes\n")
                write_round_state(round_dir, round="opt-round-1", parent_round="baseline",
                                  hypothesis="fuse the three kernels", evidence_sources=["benchmark"],
                                  correctness_status="passed", benchmark_status="passed",
                                  perf_artifact="opt_softmax_perf.txt",
                                  comparison_target_path="../baseline/softmax_perf.txt",
                                  effective_metric_source="kernel")
            continue
        argv = shlex.split(line.split("  #")[0])[1:]
        proc = subprocess.run([sys.executable, "-m", "helix_engine", *argv], cwd=ws, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        if argv[0] == "start-round":  # the README's own example draws no "unusual combination" warning
            assert json.loads(proc.stdout).get("warnings") in (None, []), proc.stdout
    status = subprocess.run([sys.executable, "-m", "helix_engine", "status", ".", "--json"], cwd=ws, env=env,
                            capture_output=True, text=True, timeout=60)
    (op,) = json.loads(status.stdout)["operators"]
    assert op["best_round"] == "round-1" and op["state"] == "ok"
    assert "## Round 1" in (ws / "opt-note.md").read_text()
