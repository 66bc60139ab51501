"""Where an operator's harnesses live (beside it, or in its workspace for baseline/ and
opt-round-N/ copies) and which test mode a test file declares. Text only, no imports of user code."""

from __future__ import annotations

from pathlib import Path

from helix_engine.errors import HelixError

_STEM_PREFIXES = ("opt_", "triton_", "reference_", "candidate_")
TEST_MODES: tuple[str, ...] = ("standalone", "differential")


def _stems(operator_file: Path) -> list[str]:
    stem = Path(operator_file).stem
    stems = [stem]
    for prefix in _STEM_PREFIXES:
        if stem.startswith(prefix) and len(stem) > len(prefix):
            stems.append(stem[len(prefix):])
    return stems


def _search_dirs(operator_file: Path) -> list[Path]:
    from helix_engine.workspace.layout import workspace_of

    folder = Path(operator_file).resolve().parent
    dirs = [folder]
    ws = workspace_of(operator_file)
    if ws != folder:
        dirs.append(ws)
    return dirs


def find_bench_file(operator_file: Path) -> Path:
    for folder in _search_dirs(operator_file):
        for stem in _stems(operator_file):
            cand = folder / f"bench_{stem}.py"
            if cand.is_file():
                return cand
    raise HelixError(
        f"no bench file found for {operator_file}: create bench_<op>.py beside it (or in the "
        "workspace) or pass --bench-file"
    )


def find_test_file(operator_file: Path, test_mode: str | None = None) -> Path:
    prefixes = {"standalone": ["test_"], "differential": ["differential_test_"]}.get(
        test_mode or "", ["differential_test_", "test_"]
    )
    for folder in _search_dirs(operator_file):
        for stem in _stems(operator_file):
            for prefix in prefixes:
                cand = folder / f"{prefix}{stem}.py"
                if cand.is_file():
                    return cand
    raise HelixError(
        f"no test file found for {operator_file}: create test_<op>.py or differential_test_<op>.py "
        "beside it (or in the workspace) or pass --test-file"
    )


def test_mode_of(test_file: Path, override: str | None = None) -> str:
    """``--test-mode`` wins; otherwise the ``# test-mode:`` header, which must then exist."""
    from helix_engine.eval.loader import HarnessContractError, read_metadata

    mode = override or read_metadata(test_file).get("test-mode")
    if not mode:
        raise HarnessContractError(
            test_file,
            "test-mode",
            "the header has no `# test-mode: standalone|differential` line; add it or pass --test-mode",
        )
    if mode not in TEST_MODES:
        raise HarnessContractError(
            test_file, "test-mode", f"unknown test mode {mode!r}; use standalone or differential"
        )
    return mode


