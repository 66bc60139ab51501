"""The benchmarks' peak-memory figure is read from outside the measured process.

Reproduction of the issue-12 finding: a child started by a parent that holds 300 MB reads
its own ``ru_maxrss`` as 300+ MB (Linux folds the pre-exec resident set into it). The helper
must report the child's own ~100 MB (plus an interpreter), by GNU time and by polling /proc.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import _measure

CHILD = "x = b'\\x01' * (100 << 20); import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


@pytest.mark.parametrize("poll", [False, True], ids=["gnu-time", "proc-polling"])
def test_peak_rss_is_the_childs_own(poll: bool) -> None:
    if not poll and _measure.gnu_time() is None:
        pytest.skip("GNU time is not installed here (apt-get install time); the polling method is tested")
    held = b"\x01" * (300 << 20)  # the benchmark process already holds 300 MB
    naive = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert int(naive.stdout) / 1024 >= 300, "the old way: ru_maxrss inside a direct child reads the parent's 300 MB"
    got = _measure.run([sys.executable, "-c", CHILD], poll=poll)
    assert len(held) == 300 << 20
    assert 100 <= got.peak_mib < 170, f"measured {got.peak_mib:.0f} MiB, the child's own is ~100 MiB + interpreter"
    assert got.wall_s > 0 and ("GNU time" in got.method) != poll


def test_a_failing_command_raises_with_its_error() -> None:
    with pytest.raises(RuntimeError, match="exited 3: boom"):
        _measure.run([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])


def test_spread_is_median_min_max() -> None:
    assert _measure.spread([3.0, 1.0, 2.0]) == "2 (1–3, n=3)"
