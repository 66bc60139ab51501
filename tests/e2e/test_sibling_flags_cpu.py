"""End to end on the cpu backend (issue 14, build 3): profile-bench with upstream's --target-op
and --verbose, through the CLI in a subprocess as an agent calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_profile_cpu import BENCH, OPERATOR, helix


@pytest.mark.slow
def test_profile_bench_target_op_and_verbose(tmp_path: Path) -> None:
    (tmp_path / "scale_add.py").write_text(OPERATOR)
    (tmp_path / "bench_scale_add.py").write_text(BENCH)
    run = helix("profile-bench", "--operator-file", "scale_add.py", "--case-id", "n256", "--target-op",
                "scale_add_kernel", "--verbose", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "- Target: `scale_add_kernel` (explicit: --target-op)" in run.stdout  # not "inferred"
    (job,) = (tmp_path / ".helix" / "jobs").iterdir()
    assert f"--- job {job.name} output ({job / 'output.log'}) ---" in run.stdout  # --verbose: the child's output
    wrong = helix("profile-bench", "--operator-file", "scale_add.py", "--case-id", "n256", "--target-op", "nope",
                  cwd=tmp_path)
    assert wrong.returncode == 1
    assert "target operator 'nope' is not in this profile; the ops are: scale_add_kernel" in wrong.stdout
