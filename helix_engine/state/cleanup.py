"""The clean-up a passing submit-round performs (upstream-state §3, stage 7): differential
result archives, non-CSV profiler output and PROF_*/OPPROF_* folders. Deletion never follows
a symlink and never leaves the workspace.

Upstream keeps only ``*.csv`` under the profile folder: that is all an Ascend profile needs. On
cuda and cpu helix's profile-bench writes a Chrome trace and a manifest instead (no CSV at all),
so helix's own outputs (``profile-manifest.json`` and the trace it names) are kept too."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from helix_engine.profile.torch_trace import MANIFEST, TRACE_FILE, read_manifest
from helix_engine.state.guideline import DELETE_PT_ENV
from helix_engine.workspace import files
from helix_engine.workspace.models import RoundState

PROFILE_PREFIXES: tuple[str, ...] = ("PROF_", "OPPROF_")


def pt_cleanup_mode() -> str:
    """never | round | run-test (default round; 1/true/yes/on → round, 0/false/no/off → never)."""
    raw = os.environ.get(DELETE_PT_ENV)
    if raw is None:
        return "round"
    value = raw.strip().lower()
    if value in ("never", "round", "run-test"):
        return value
    if value in ("0", "false", "no", "off"):
        return "never"
    return "round"


def _remove(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path)
        return True
    except OSError:
        return False


def remove_pt_files(round_dir: Path) -> list[str]:
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in sorted(round_dir.iterdir()):
            lower = entry.name.lower()
            if entry.is_file() and not entry.is_symlink() and (lower == "test_result.pt" or lower.endswith("_result.pt")):
                if _remove(entry):
                    removed.append(entry.name)
    return removed


def _helix_outputs(folder: Path) -> set[str]:
    """Names in ``folder`` that helix's profile-bench wrote: the manifest and its trace file."""
    kept = {MANIFEST, TRACE_FILE}
    named = read_manifest(folder).get("trace_file") if (folder / MANIFEST).is_file() else None
    if isinstance(named, str) and named and Path(named).name == named:
        kept.add(named)
    return kept


def keep_only_csv(profile_dir: Path) -> list[str]:
    """Delete everything under ``profile_dir`` that is neither a ``*.csv`` file nor one of
    helix's own profile outputs (empty folders go too)."""
    removed: list[str] = []

    def walk(folder: Path) -> None:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        ours = _helix_outputs(folder)
        for entry in entries:
            if entry.is_symlink():
                if _remove(entry):
                    removed.append(str(entry.relative_to(profile_dir)))
            elif entry.is_dir():
                walk(entry)
                with contextlib.suppress(OSError):
                    if not any(entry.iterdir()):
                        entry.rmdir()
            elif entry.suffix.lower() != ".csv" and entry.name not in ours and _remove(entry):
                removed.append(str(entry.relative_to(profile_dir)))

    if profile_dir.is_dir() and not profile_dir.is_symlink():
        walk(profile_dir)
    return removed


def remove_prof_dirs(folder: Path, keep: Path | None = None) -> list[str]:
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in sorted(folder.iterdir()):
            if not entry.name.startswith(PROFILE_PREFIXES):
                continue
            if keep is not None and entry.resolve() == keep.resolve():
                continue
            if _remove(entry):
                removed.append(entry.name)
    return removed


def profile_dir_of(round_dir: Path, state: RoundState | None) -> Path | None:
    workspace = round_dir.parent
    if state is not None and state.profile_dir:
        try:
            declared = files.resolve_inside(workspace, round_dir, state.profile_dir)
        except ValueError:
            declared = None
        if declared is not None and declared.is_dir():
            return declared
    conventional = round_dir / "profile"
    return conventional if conventional.is_dir() else None


def pass_cleanup(round_dir: Path, state: RoundState | None) -> list[str]:
    """Run the whole pass clean-up; returns what was removed (relative names)."""
    round_dir = Path(round_dir)
    removed: list[str] = []
    if pt_cleanup_mode() == "round":
        removed += remove_pt_files(round_dir)
    profile = profile_dir_of(round_dir, state)
    if profile is not None:
        removed += [f"{profile.name}/{name}" for name in keep_only_csv(profile)]
    removed += remove_prof_dirs(round_dir, keep=profile)
    removed += remove_prof_dirs(round_dir.parent, keep=profile)
    return removed
