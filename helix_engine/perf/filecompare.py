"""compare-perf over two perf files, judged with what the workspace knows about them.

One function for ``helix compare-perf`` and the comparison ``run-bench`` prints: the evaluation
core's comparison of the two files (upstream's block comes from it, unchanged), with

* the margins of the workspace's calibration (``.helix/calibration.json``) when it describes how
  the files were measured, else the default 1% (perf/calibration.py);
* the paired result beside the compared file (``*.paired.json``) when its reference is the
  operator the baseline file was measured from: verdicts then use its blocks (perf/paired.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from helix_engine.perf import compare
from helix_engine.perf.calibration import margins_for, workspace_of_file
from helix_engine.perf.paired import attach_paired, operator_of_perf
from helix_engine.perf.results import RoundEvaluation
from helix_engine.workspace.models import PerfRecord


def compare_perf_files(baseline_path: Path, compare_path: Path, baseline: Sequence[PerfRecord],
                       candidate: Sequence[PerfRecord], metric_source: str = "auto",
                       skip_latency_errors: bool = False, with_ci: bool = True) -> list[RoundEvaluation]:
    """The comparisons of compare-perf (one, or two sections for ``-m all``)."""
    ws = workspace_of_file(Path(compare_path)) or workspace_of_file(Path(baseline_path))
    margins = margins_for(ws, [*baseline, *candidate])
    names = {"baseline_name": str(baseline_path), "compare_name": str(compare_path)}
    if metric_source == "all":
        comps = compare.compare_all(baseline, candidate, skip_latency_errors, with_ci, noise_margin=margins,
                                    **names)
    else:
        comps = [compare.compare_records(baseline, candidate, metric_source, skip_latency_errors, with_ci,
                                         noise_margin=margins, **names)]
    if with_ci:
        reference = operator_of_perf(Path(baseline_path))
        for comp in comps:
            why = attach_paired(comp, Path(compare_path), reference, candidate, noise_margin=margins,
                                skip_latency_errors=skip_latency_errors)
            if why and comp.ci_note is None:
                comp.ci_note = f"Paired result not used: {why}."
    return comps
