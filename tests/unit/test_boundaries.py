"""The import arrow points one way: engine never imports textual; the cockpit never imports
torch, triton or torch_npu (fast start, and a broken GPU stack cannot stop it opening)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _engine_modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "helix_engine").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def test_engine_never_imports_textual() -> None:
    imports = "\n".join(f"import {m}" for m in _engine_modules())
    loaded = _modules_after(imports + "\nimport helix_engine.cli as c; c.build_parser()")
    assert not any(m == "textual" or m.startswith("textual.") for m in loaded)


def test_engine_cli_does_not_import_torch_or_triton() -> None:
    loaded = _modules_after("import helix_engine.cli as c; c.build_parser()")
    for heavy in ("torch", "triton", "torch_npu", "textual"):
        assert heavy not in loaded, f"helix_engine.cli imported {heavy}"


def test_tui_never_imports_torch_triton_or_torch_npu() -> None:
    tui = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "helix_tui").rglob("*.py")
    )
    loaded = _modules_after("\n".join(f"import {m}" for m in tui))
    for heavy in ("torch", "triton", "torch_npu"):
        assert heavy not in loaded, f"importing helix_tui loaded {heavy}"
