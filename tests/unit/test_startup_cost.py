"""Start-up builds only what a command uses (issue 12, goal 4).

`helix --help` imports no model module (nor pydantic); `helix status` imports no pydantic and compiles
the checks of the file models it validates and no other (filemodel compiles a class's on first use).
Each check runs the command in a fresh interpreter and reads what it loaded or built.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.builders import build_workspace

ROOT = Path(__file__).resolve().parents[2]
MODEL_MODULES = ("helix_engine.workspace.models", "helix_engine.workspace.filemodel", "helix_engine.perf.results",
                 "helix_engine.perf.margins", "helix_engine.perf.paired", "helix_engine.perf.calibration",
                 "helix_engine.jobs.registry", "helix_engine.workspace.leftovers")

_PROBE = """
import contextlib, io, json, sys
from helix_tui.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
built, deferred = [], []
if "helix_engine.workspace.filemodel" in sys.modules:
    from helix_engine.workspace.filemodel import FileModel
    todo, seen = [FileModel], set()
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    for cls in seen:
        if cls.__module__.startswith("helix_engine") and not cls.__name__.startswith("_"):
            name = f"{cls.__module__}.{cls.__qualname__}"
            (built if cls.__dict__.get("_spec") is not None else deferred).append(name)
print(json.dumps({"code": code, "modules": sorted(sys.modules), "built": sorted(built),
                  "deferred": sorted(deferred), "stdout": out.getvalue()}))
"""


def _run(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_help_imports_no_model_module_and_no_pydantic() -> None:
    found = _run("--help")
    assert found["code"] == 0 and "start-round" in found["stdout"]  # the whole command list was built
    loaded = set(found["modules"])
    assert not loaded & set(MODEL_MODULES)
    assert "pydantic" not in loaded


def test_status_imports_no_pydantic_and_compiles_only_the_models_it_validates(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0},
                         rounds=[{"a": 8.0, "b": 18.0}, {"a": 9.0, "b": 10.0}])
    found = _run("status", str(ws), "--json")
    assert found["code"] == 0
    assert json.loads(found["stdout"])["operators"][0]["best_round"] == "round-2"
    # the workspace file models are filemodel classes (~60 ms of pydantic's import and builds, issue 12)
    assert "pydantic" not in set(found["modules"])
    built = set(found["built"])
    # what status validates: the files it read (its results are plain dataclasses: no model)
    assert {"helix_engine.workspace.models.PerfRecord", "helix_engine.workspace.models.RoundState"} <= built
    # loaded but unused here (no pending transition, no calibration, no paired run): never compiled
    unused = {"helix_engine.workspace.leftovers.PendingTransition", "helix_engine.perf.calibration.Calibration",
              "helix_engine.perf.paired.PairedRun"}
    assert not built & unused
    assert set(found["deferred"]) & unused  # some were imported, and stayed uncompiled
    # what only job children (subprocess: nvidia-smi) and intervals (statistics) use is imported there
    assert not {"subprocess", "statistics"} & set(found["modules"])


def test_a_computed_status_after_one_perf_file_imports_only_what_it_reads(tmp_path: Path) -> None:
    """The computed status (one perf file rewritten since the last run) answers from the sealed
    caches: no argparse (its own parse), no markdown parser (the ledger's facts are cached), no
    tempfile (the cache writer names its own temp file), no datetime (no comparison is made)."""
    import time

    from helix_engine.workspace.status_cache import RECENT_S

    ws = build_workspace(tmp_path, baseline={"a": 10.0, "b": 20.0},
                         rounds=[{"a": 8.0, "b": 18.0}, {"a": 9.0, "b": 10.0}])
    time.sleep(RECENT_S + 0.2)  # settled (mtime and ctime): the first run keeps every entry
    assert _run("status", str(ws), "--json")["code"] == 0
    perf = ws / "opt-round-1" / "opt_add_perf.txt"
    perf.write_bytes(perf.read_bytes())
    found = _run("status", str(ws), "--json")
    assert found["code"] == 0 and json.loads(found["stdout"])["operators"][0]["best_round"] == "round-2"
    bare = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, check=True)
    at_start = set(json.loads(bare.stdout))  # what this interpreter's site imports anyway (.pth hooks)
    loaded = set(found["modules"]) - at_start
    assert sorted({"argparse", "tempfile", "textwrap", "datetime", "pydantic", "helix_engine.cli",
                   "helix_engine.workspace.markdown"} & loaded) == []
